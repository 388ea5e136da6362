import { describeInterop } from '../helpers/interop/suite.js';
import { startExpress } from '../helpers/interop/node-upstreams.js';

// Express 5 on its own `app.listen` server (Node's defaults: `Keep-Alive: timeout=5`), with its
// ETag/304, sendFile and body-parser 413. The spaced requests use one with keepAliveTimeout 1 s.
describeInterop({
  server: 'Express',
  keepAlive: true,
  echoesDigest: true,
  earlyAnswerPaths: ['/v1/interop/upload'],
  start: (site) => startExpress(site),
  startShortIdle: (site) => startExpress(site, { keepAliveTimeoutMs: 1000 }),
});
