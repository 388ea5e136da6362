import { describe, expect, it } from 'vitest';
import { parentFromHeaders, traceparentOf } from '../../src/tracing/trace-context.js';

// W3C Trace Context request fields: what is continued, what is ignored as if absent.

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('traceparent', () => {
  it('a valid version 00 field is continued, with its sampled flag', () => {
    expect(parentFromHeaders(`00-${TRACE}-${SPAN}-01`, undefined)).toMatchObject({
      traceId: TRACE,
      spanId: SPAN,
      traceFlags: 1,
      isRemote: true,
    });
    expect(parentFromHeaders(`00-${TRACE}-${SPAN}-00`, undefined)).toMatchObject({ traceFlags: 0 });
    // Flags other than sampled are not ours to pass on.
    expect(parentFromHeaders(`00-${TRACE}-${SPAN}-ff`, undefined)).toMatchObject({ traceFlags: 1 });
  });

  it('a later version is read by its version-00 fields, extra fields allowed', () => {
    expect(parentFromHeaders(`cc-${TRACE}-${SPAN}-01-what-ever`, undefined)).toMatchObject({ traceId: TRACE });
  });

  it.each([
    ['all-zero trace id', `00-${'0'.repeat(32)}-${SPAN}-01`],
    ['all-zero span id', `00-${TRACE}-${'0'.repeat(16)}-01`],
    ['version ff', `ff-${TRACE}-${SPAN}-01`],
    ['upper-case hex', `00-${TRACE.toUpperCase()}-${SPAN}-01`],
    ['short trace id', `00-${TRACE.slice(1)}-${SPAN}-01`],
    ['version 00 with more fields', `00-${TRACE}-${SPAN}-01-extra`],
    ['a quote and more', `00-${TRACE}-${SPAN}-01"\n{"x":1}`],
    ['empty', ''],
  ])('%s is ignored', (_name, value) => {
    expect(parentFromHeaders(value, 'a=b')).toBeUndefined();
  });

  it('repeated traceparent fields are ignored', () => {
    expect(parentFromHeaders([`00-${TRACE}-${SPAN}-01`, `00-${TRACE}-${SPAN}-01`], undefined)).toBeUndefined();
  });

  it('is written back as version 00 with the sampled flag', () => {
    expect(traceparentOf({ traceId: TRACE, spanId: SPAN, traceFlags: 1 })).toBe(`00-${TRACE}-${SPAN}-01`);
    expect(traceparentOf({ traceId: TRACE, spanId: SPAN, traceFlags: 0 })).toBe(`00-${TRACE}-${SPAN}-00`);
  });
});

describe('tracestate', () => {
  const state = (value: string | string[]) => parentFromHeaders(`00-${TRACE}-${SPAN}-01`, value)?.traceState?.serialize();

  it('is passed on when every member is well-formed (repeated fields are one list)', () => {
    expect(state('congo=t61rcWkgMzE, rojo=00f067aa0ba902b7')).toBe('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
    expect(state(['a=1', 'tenant@system=2'])).toBe('a=1,tenant@system=2');
  });

  it.each([
    ['a member without =', 'a=1,garbage'],
    ['an upper-case key', 'Vendor=1'],
    ['a value with a comma-less = sign', 'a=1=2'],
    ['more than 32 members', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')],
    ['longer than 512 characters', `a=${'x'.repeat(600)}`],
  ])('is dropped whole with %s', (_name, value) => {
    expect(state(value)).toBeUndefined();
  });
});
