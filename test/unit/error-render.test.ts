import { describe, expect, it } from 'vitest';
import { ERRORS, type ErrorCode } from '../../src/errors/registry.js';
import { errorBody, rawErrorResponse } from '../../src/errors/render.js';

describe('Error renderer', () => {
  it('renders every registered code with status equal to the registry status', () => {
    for (const code of Object.keys(ERRORS) as ErrorCode[]) {
      const body = errorBody(code);
      expect(body).toEqual({ code, message: ERRORS[code].message, status: ERRORS[code].status });
      expect(body.status).toBeGreaterThanOrEqual(400);
      expect(body.status).toBeLessThan(600);
    }
  });

  it('takes a specific message when given one', () => {
    expect(errorBody('invalid_body', 'name is required')).toEqual({ code: 'invalid_body', message: 'name is required', status: 400 });
  });

  it('renders a raw HTTP response whose Content-Length matches the body', () => {
    const raw = rawErrorResponse('request_header_fields_too_large');
    const [head, body] = raw.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(head).toContain(`content-length: ${Buffer.byteLength(body!)}`);
    expect(JSON.parse(body!)).toEqual({
      code: 'request_header_fields_too_large',
      message: ERRORS.request_header_fields_too_large.message,
      status: 431,
    });
  });
});
