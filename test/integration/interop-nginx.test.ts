import { describeInterop } from '../helpers/interop/suite.js';
import { NGINX_REFUSE_PATH, nginxBinary, startNginx } from '../helpers/interop/nginx-upstream.js';

// Debian's nginx as the origin: static files, `client_max_body_size` and `return 413`, and an
// idle timeout (keepalive_timeout) that it does not announce (no Keep-Alive header), so a gateway
// that trusts a default idle time of its own reuses connections nginx is closing. The spaced
// requests get 100 ms rather than nginx's 75 s: the same race at any length, and about a hundred
// spaced requests fit in twelve seconds. Every other test gets nginx's default, so that a loaded
// machine's pauses between requests never count as idle time (the connection-reuse bound).
const binary = nginxBinary();

describeInterop({
  server: 'nginx',
  missing: binary ? undefined : 'no nginx binary (apt-get install nginx; .ci/run installs it)',
  keepAlive: true,
  echoesDigest: false,
  earlyAnswerPaths: ['/v1/interop/upload', NGINX_REFUSE_PATH],
  start: (site) => startNginx(binary!, site, { keepaliveTimeoutMs: 75_000 }),
  startShortIdle: (site) => startNginx(binary!, site, { keepaliveTimeoutMs: 100 }),
});
