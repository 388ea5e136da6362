import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { isJsonContentType, readJsonBody } from '../../src/http/read-json-body.js';

/** Enough of an IncomingMessage for the reader: headers, a body stream and `complete`. */
function fakeRequest(headers: Record<string, string>, chunks: Array<string | Buffer>): IncomingMessage & { bytesPulled: () => number } {
  const stream = new PassThrough() as unknown as IncomingMessage & { bytesPulled: () => number };
  let pulled = 0;
  stream.on('data', (chunk: Buffer) => (pulled += chunk.length));
  Object.assign(stream, { headers, complete: false, bytesPulled: () => pulled });
  setImmediate(() => {
    for (const chunk of chunks) (stream as unknown as PassThrough).write(chunk);
    (stream as unknown as PassThrough).end();
    stream.once('end', () => Object.assign(stream, { complete: true }));
  });
  return stream;
}

const JSON_TYPE = { 'content-type': 'application/json' };

describe('isJsonContentType', () => {
  it.each([
    'application/json',
    'APPLICATION/JSON',
    'application/json; charset=utf-8',
    'application/json;charset=UTF8',
    'application/json; charset="utf-8"',
    '  application/json ; foo=bar',
  ])('accepts %s', (type) => expect(isJsonContentType(type)).toBe(true));

  it.each([
    undefined,
    '',
    'text/json',
    'application/jsonx',
    'application/json-patch+json',
    'application/json; charset=iso-8859-1',
    'text/plain; application/json',
  ])('refuses %s', (type) => expect(isJsonContentType(type)).toBe(false));
});

describe('readJsonBody', () => {
  it('parses a body delivered in pieces', async () => {
    expect(await readJsonBody(fakeRequest(JSON_TYPE, ['{"na', 'me": "Dog"}']), 100)).toEqual({ ok: true, value: { name: 'Dog' } });
  });

  it('accepts a UTF-8 byte order mark', async () => {
    expect(await readJsonBody(fakeRequest(JSON_TYPE, [Buffer.from('\ufeff{"name":"Dog"}')]), 100)).toEqual({
      ok: true,
      value: { name: 'Dog' },
    });
  });

  it('refuses a declared Content-Length over the limit before reading anything', async () => {
    const req = fakeRequest({ ...JSON_TYPE, 'content-length': '101' }, ['x'.repeat(101)]);
    expect(await readJsonBody(req, 100)).toMatchObject({ ok: false, code: 'payload_too_large' });
    expect(req.bytesPulled()).toBe(0);
  });

  it('stops at the limit when the body streams without a length', async () => {
    const req = fakeRequest(JSON_TYPE, ['x'.repeat(60), 'x'.repeat(60), 'x'.repeat(60)]);
    expect(await readJsonBody(req, 100)).toMatchObject({
      ok: false,
      code: 'payload_too_large',
      message: expect.stringContaining('100 bytes'),
    });
  });

  it('accepts exactly the limit', async () => {
    const body = `"${'x'.repeat(98)}"`;
    expect(await readJsonBody(fakeRequest(JSON_TYPE, [body]), 100)).toEqual({ ok: true, value: 'x'.repeat(98) });
  });

  it('refuses the wrong media type without reading', async () => {
    expect(await readJsonBody(fakeRequest({ 'content-type': 'text/plain' }, ['{}']), 100)).toMatchObject({
      ok: false,
      code: 'unsupported_media_type',
    });
  });

  it.each([
    ['empty', [''], /empty/],
    ['not JSON', ['{name: Dog}'], /not valid JSON/],
    ['invalid UTF-8', [Buffer.from([0x22, 0xc3, 0x28, 0x22])], /UTF-8/],
  ])('refuses a body that is %s with invalid_json', async (_label, chunks, message) => {
    expect(await readJsonBody(fakeRequest(JSON_TYPE, chunks), 100)).toMatchObject({
      ok: false,
      code: 'invalid_json',
      message: expect.stringMatching(message),
    });
  });

  it('settles when the client goes away mid-body', async () => {
    const req = fakeRequest(JSON_TYPE, []);
    const reading = readJsonBody(req, 100);
    (req as unknown as PassThrough).destroy(new Error('aborted'));
    expect(await reading).toMatchObject({ ok: false });
  });
});
