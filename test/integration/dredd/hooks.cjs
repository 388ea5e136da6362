// Dredd hooks for test/integration/dredd.test.ts. Dredd makes one transaction per documented
// response of every operation and sends the same example request for each; these hooks turn each
// into the request that really gets that response from the running stack, or skip it (with the
// reason) when only a fault can produce it (those are checked in contract.test.ts, which injects
// the faults).
//
// Two adjustments to Dredd 14's reading of the document:
// - its OpenAPI 3 parser expects every documented header, ignoring `required`: the hooks drop the
//   expectation of headers the document does not mark required, so "required" means what the
//   document says;
// - it wants Content-Type to equal the documented media type exactly, so `application/json;
//   charset=utf-8` fails: the hooks compare the media type instead (RFC 9110 §8.3.1: parameters
//   are not part of it);
// - it builds the expected body from an example holding every property the schema lists, and then
//   wants each of them: the hooks keep only the properties the schema marks required.
const { readFileSync } = require('node:fs');
const hooks = require('hooks');
const { parse } = require('yaml');

/** The document Dredd runs (DREDD_DOCUMENT), read again here for what Dredd's parser leaves out. */
const document = parse(readFileSync(process.env.DREDD_DOCUMENT, 'utf8'));
const resolve = (node) => {
  let n = node;
  while (n && n.$ref)
    n = n.$ref
      .slice(2)
      .split('/')
      .reduce((at, part) => at[part], document);
  return n;
};

const KEY = process.env.DREDD_KEY;
const USED_UP_KEY = process.env.DREDD_USED_UP_KEY;
/** Statuses only a fault or another configuration produces: left to contract.test.ts. */
const FAULT_ONLY = new Set([410, 500, 502, 503, 504]);

hooks.beforeEach((transaction) => {
  const path = transaction.origin.resourceName;
  const method = transaction.request.method.toLowerCase();
  const status = Number(transaction.expected.statusCode);
  const response = resolve(document.paths[path][method].responses[String(status)]);

  // /usage reads the quota without consuming it, so a used-up key gets its usage there; only the
  // per-address failed-authentication limit answers 429 on it, and provoking that here would
  // block this test's address for the other transactions (admin-api.test.ts covers it).
  // The same holds for /ws-tickets other than POST: a used-up key gets 405 there (nothing to count).
  // 402 needs a plan that requires credits, which the bundled stack's keys are not on:
  // credits.test.ts provokes it.
  if (status === 402) {
    transaction.skip = true;
    return;
  }
  // 403 and a limit rule's 400 need scopes, networks or limit rules of the operator's, which the
  // bundled config sets none of: scopes.test.ts, edge-ip-rules.test.ts and limit-rules.test.ts
  // provoke them.
  const ref = document.paths[path][method].responses[String(status)].$ref;
  if (status === 403 || ref === '#/components/responses/LimitAttributeMissing') {
    transaction.skip = true;
    return;
  }
  if (FAULT_ONLY.has(status) || (status === 429 && (path === '/usage' || (path === '/ws-tickets' && method !== 'post')))) {
    transaction.skip = true;
    return;
  }
  const headers = transaction.request.headers;
  const secured = document.paths[path][method].security === undefined;
  if (secured) headers.Authorization = `Bearer ${KEY}`;
  if (status === 401) delete headers.Authorization;
  if (status === 429) headers.Authorization = `Bearer ${USED_UP_KEY}`;
  if (status === 400 && path === '/pets/{petId}') transaction.fullPath = transaction.fullPath.replace('/pets/42', '/pets/forty-two');
  if (status === 400 && path === '/categories') transaction.request.body = '{}';
  if (status === 413) transaction.request.body = JSON.stringify({ name: 'x'.repeat(70 * 1024) });
  if (status === 415) headers['Content-Type'] = 'text/plain';
  // `*` matches whatever list is current (RFC 9110 §13.1.2); other transactions send no validator.
  if (status === 304) headers['If-None-Match'] = '*';
  else delete headers['If-None-Match'];

  // Keep only the header expectations the document marks required.
  const documented = response.headers ?? {};
  const required = new Set(
    Object.entries(documented)
      .filter(([, h]) => resolve(h).required)
      .map(([name]) => name.toLowerCase()),
  );
  for (const name of Object.keys(transaction.expected.headers ?? {})) {
    if (!required.has(name.toLowerCase())) delete transaction.expected.headers[name];
  }
  transaction.documentedMediaTypes = Object.keys(response.content ?? {});

  // Keep only the body properties the document marks required.
  const schema = resolve(response.content?.['application/json']?.schema);
  if (schema?.type === 'object' && Array.isArray(schema.required) && transaction.expected.body) {
    const body = JSON.parse(transaction.expected.body);
    for (const name of Object.keys(body)) if (!schema.required.includes(name)) delete body[name];
    transaction.expected.body = JSON.stringify(body);
  }
});

hooks.afterEach((transaction) => {
  if (transaction.skip || !transaction.real) return;
  const mediaType = String(transaction.real.headers['content-type'] ?? '')
    .split(';')[0]
    .trim()
    .toLowerCase();
  // A response documented without content (304) must come without one.
  if (transaction.documentedMediaTypes.length === 0) {
    if (mediaType !== '' || transaction.real.body) transaction.fail = `a body (${mediaType || 'no Content-Type'}) where none is documented`;
    return;
  }
  if (!transaction.documentedMediaTypes.includes(mediaType)) {
    transaction.fail = `Content-Type ${mediaType || '(none)'} is not documented (${transaction.documentedMediaTypes.join(', ')})`;
  }
});
