import { describeInterop } from '../helpers/interop/suite.js';
import { startFastify } from '../helpers/interop/node-upstreams.js';

// Fastify 5 with its defaults (keepAliveTimeout 72 s), its bodyLimit 413 and stream replies. The
// spaced requests use one with keepAliveTimeout 1 s.
describeInterop({
  server: 'Fastify',
  keepAlive: true,
  echoesDigest: true,
  earlyAnswerPaths: ['/v1/interop/upload'],
  resetsAfterEarlyAnswer: 'Node closes the socket after a 413 with the body unread (Fastify stops reading at bodyLimit)',
  start: (site) => startFastify(site),
  startShortIdle: (site) => startFastify(site, { keepAliveTimeoutMs: 1000 }),
});
