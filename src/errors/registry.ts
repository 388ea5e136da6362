// One registry of every error code a client can see: code → HTTP status and default message.
// Policies and handlers name a code; the renderer turns it into the Error body of openapi.yaml.

export const ERRORS = {
  // 400 family: the request itself is wrong
  bad_request: { status: 400, message: 'The request is malformed.' },
  invalid_json: { status: 400, message: 'The request body is not valid JSON.' },
  invalid_body: { status: 400, message: 'The request body holds missing or invalid fields.' },
  invalid_query: { status: 400, message: 'The query string holds unknown or invalid parameters.' },
  unknown_plan: { status: 400, message: 'The plan is not defined in plans.yaml.' },
  limit_attribute_missing: {
    status: 400,
    message: 'The request lacks an attribute a limit rule counts by (a header, a token claim or the client address); see the message.',
  },
  request_invalid: { status: 400, message: "The request does not match the API's OpenAPI description; see `errors`." },
  // 401: who is calling is unknown
  missing_api_key: { status: 401, message: 'An API key is required: send `Authorization: Bearer <API_KEY>`.' },
  malformed_api_key: { status: 401, message: 'The Authorization header does not hold a well-formed API key.' },
  invalid_api_key: { status: 401, message: 'The API key is not valid.' },
  revoked_api_key: { status: 401, message: 'The API key has been revoked.' },
  api_key_expired: { status: 401, message: 'The API key has expired.' },
  invalid_token: { status: 401, message: 'The access token is not valid; the WWW-Authenticate header says why.' },
  missing_admin_token: { status: 401, message: 'An admin token is required: send `Authorization: Bearer <admin token>`.' },
  invalid_admin_token: { status: 401, message: 'The admin token is not valid.' },
  invalid_ws_ticket: {
    status: 401,
    message: 'The WebSocket ticket is unknown, expired or already used; get a new one with POST /v1/ws-tickets.',
  },
  sign_in_failed: {
    status: 401,
    message: 'The sign-in with the identity provider could not be completed; start again from the console.',
  },
  invalid_gateway_assertion: { status: 401, message: 'The request does not carry a valid gateway assertion.' },
  // 403: the caller is known but may not do this
  invalid_csrf_token: {
    status: 403,
    message: 'A console change must carry the X-CSRF-Token of its session, from the console page itself.',
  },
  cors_origin_not_allowed: {
    status: 403,
    message: 'This origin may not call the API from a browser (gateway.yaml cors.origins).',
  },
  insufficient_role: {
    status: 403,
    message: "The caller's role or owner scope does not allow this; nothing was changed.",
  },
  no_console_role: {
    status: 403,
    message: 'The identity provider gave this account no console role; ask for one to be granted.',
  },
  ip_not_allowed: { status: 403, message: 'Requests from this network are not allowed here.' },
  insufficient_scope: {
    status: 403,
    message: 'The credential lacks a scope this operation requires (WWW-Authenticate names them); no quota was consumed.',
  },
  service_not_in_plan: {
    status: 403,
    message: "The API key's plan does not include the service this path belongs to; no quota was consumed.",
  },
  // 402: a plan with prepaid credits, and a balance that cannot pay for this request. Not a 429:
  // waiting will not help (no Retry-After), a top-up will; it counts towards no ban.
  insufficient_credits: {
    status: 402,
    message: 'The prepaid credit balance cannot cover this request; it was not processed. Add credits to continue.',
  },
  // 404/405/410/413/415: the resource or representation is wrong
  not_found: { status: 404, message: 'No such resource.' },
  key_not_found: { status: 404, message: 'No API key has this id.' },
  method_not_allowed: { status: 405, message: 'The method is not allowed on this resource.' },
  key_revoked: { status: 409, message: 'The API key is revoked; a revoked key cannot be changed this way.' },
  credits_below_zero: { status: 409, message: 'The change would take the credit balance below zero; nothing was changed.' },
  route_sunset: { status: 410, message: 'This operation has passed its sunset date and is gone.' },
  request_timeout: { status: 408, message: 'The request was not received in time.' },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, message: 'The request body must be application/json.' },
  request_header_fields_too_large: { status: 431, message: 'The request headers are too large.' },
  // 429: too many requests
  rate_limit_exceeded: { status: 429, message: 'Rate limit exceeded; retry after the time in Retry-After.' },
  api_key_banned: {
    status: 429,
    message: 'The API key is temporarily banned for continuing after rate-limit rejections; retry after the time in Retry-After.',
  },
  too_many_concurrent_requests: {
    status: 429,
    message: 'Too many requests in flight for this API key (its maxConcurrent); retry when one has finished.',
  },
  too_many_unauthenticated_requests: {
    status: 429,
    message: 'Too many unauthenticated requests from this address; retry after the time in Retry-After.',
  },
  too_many_preflights: {
    status: 429,
    message: 'Too many CORS preflights from this address (gateway.yaml cors.preflightsPerMinute); retry after the time in Retry-After.',
  },
  // 5xx: our side or the upstream failed
  internal_error: { status: 500, message: 'An internal error occurred.' },
  plan_not_configured: { status: 500, message: "The API key's plan is not configured on this gateway; contact the operator." },
  bad_gateway: { status: 502, message: 'The upstream service could not be reached or broke the connection.' },
  sign_in_provider_unavailable: {
    status: 502,
    message: "The console's identity provider could not be reached or gave an unusable answer; try again shortly.",
  },
  key_store_unavailable: { status: 503, message: 'The API key store is unavailable; retry shortly.' },
  identity_provider_unavailable: {
    status: 503,
    message: "The identity provider's keys cannot be fetched, so the token cannot be checked; retry after the time in Retry-After.",
  },
  rate_limit_store_unavailable: { status: 503, message: 'The rate-limit store is unavailable; retry shortly.' },
  gateway_overloaded: {
    status: 503,
    message: 'This gateway is too busy to decide the quota in time; retry after the time in Retry-After.',
  },
  service_unavailable: { status: 503, message: 'The service is shutting down or not ready.' },
  upstream_unavailable: {
    status: 503,
    message: 'Every instance of the upstream service is out of rotation; retry after the time in Retry-After.',
  },
  policy_timeout: { status: 503, message: 'A gateway policy did not decide in time; retry shortly.' },
  gateway_timeout: { status: 504, message: 'The upstream service did not answer in time.' },
  http_version_not_supported: { status: 505, message: 'Only HTTP/1.0, HTTP/1.1 and HTTP/2 (over TLS, by ALPN) are served.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

export function statusOf(code: ErrorCode): number {
  return ERRORS[code].status;
}
