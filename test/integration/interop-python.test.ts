import { describeInterop } from '../helpers/interop/suite.js';
import { python3Binary, startPython } from '../helpers/interop/python-upstream.js';

// Python's http.server (test/fixtures/interop/http10_server.py): HTTP/1.0, a connection per
// request, a close-delimited streamed body, a 413 sent without reading the body and then a close.
const binary = python3Binary();

describeInterop({
  server: 'Python http.server (HTTP/1.0)',
  missing: binary ? undefined : 'no python3 (apt-get install python3; .ci/run installs it)',
  keepAlive: false,
  echoesDigest: true,
  earlyAnswerPaths: ['/v1/interop/upload'],
  resetsAfterEarlyAnswer: 'http.server closes the socket after its 413 without reading the body',
  start: (site) => startPython(binary!, site),
});
