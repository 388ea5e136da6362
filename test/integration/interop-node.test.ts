import { describeInterop } from '../helpers/interop/suite.js';
import { startPlainNode } from '../helpers/interop/node-upstreams.js';

// A plain Node `http.createServer` with every default: it announces `Keep-Alive: timeout=5`, the
// upstream most of our users run (issue 21). The spaced requests use one with keepAliveTimeout 1 s.
describeInterop({
  server: 'node:http (defaults)',
  keepAlive: true,
  echoesDigest: true,
  earlyAnswerPaths: ['/v1/interop/upload'],
  start: (site) => startPlainNode(site),
  startShortIdle: (site) => startPlainNode(site, { keepAliveTimeoutMs: 1000 }),
});
