import { describeInterop } from '../helpers/interop/suite.js';
import { NGINX_REFUSE_PATH, nginxBinary, startNginx } from '../helpers/interop/nginx-upstream.js';

// Debian's nginx as the origin: static files, `client_max_body_size` and `return 413`, and a short
// keepalive_timeout that it does not announce (no Keep-Alive header), so a gateway that trusts a
// default idle time of its own reuses connections nginx is closing. 100 ms rather than nginx's
// 75 s: the same race at any length, and about a hundred spaced requests fit in twelve seconds.
const binary = nginxBinary();

describeInterop({
  server: 'nginx',
  missing: binary ? undefined : 'no nginx binary (apt-get install nginx; .ci/run installs it)',
  keepAlive: true,
  echoesDigest: false,
  earlyAnswerPaths: ['/v1/interop/upload', NGINX_REFUSE_PATH],
  start: (site) => startNginx(binary!, site, { keepaliveTimeoutMs: 100 }),
});
