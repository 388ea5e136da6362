export { freePort } from '../harness/free-port.js';
