import { describe, expect, it } from 'vitest';
import { closeFrame, FrameCursor } from '../../src/gateway/websocket-frames.js';

// The frame boundaries the gateway may put its own Close at (websocket-frames.ts), over frames of
// every length form, masked and not, split anywhere across chunks.

function frame(payloadBytes: number, masked: boolean): Buffer {
  const length = payloadBytes < 126 ? [payloadBytes] : payloadBytes < 65536 ? [126, payloadBytes >> 8, payloadBytes & 0xff] : null;
  const head =
    length !== null
      ? Buffer.from([0x82, (masked ? 0x80 : 0) | length[0]!, ...length.slice(1)])
      : Buffer.concat([Buffer.from([0x82, (masked ? 0x80 : 0) | 127]), bigLength(payloadBytes)]);
  return Buffer.concat([head, masked ? Buffer.from([1, 2, 3, 4]) : Buffer.alloc(0), Buffer.alloc(payloadBytes, 0x61)]);
}
function bigLength(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

describe('FrameCursor', () => {
  const frames = [frame(0, false), frame(5, true), frame(125, false), frame(300, true), frame(70_000, false)];
  const stream = Buffer.concat(frames);
  const boundaries = frames.reduce<number[]>((at, f) => [...at, at.at(-1)! + f.length], [0]);

  it('is at a boundary exactly between frames, however the stream is cut into chunks', () => {
    for (const size of [1, 2, 3, 7, 13, 4096, stream.length]) {
      const cursor = new FrameCursor();
      const seen: number[] = [];
      for (let at = 0; at < stream.length; at += size) {
        const chunk = stream.subarray(at, Math.min(at + size, stream.length));
        let read = 0;
        while (read < chunk.length) {
          if (cursor.atBoundary) seen.push(at + read);
          // Up to the next boundary; when at one already, one byte on.
          read += cursor.advance(chunk.subarray(read), true) || cursor.advance(chunk.subarray(read, read + 1));
        }
      }
      if (cursor.atBoundary) seen.push(stream.length);
      expect(seen, `chunks of ${size}`).toEqual(boundaries);
    }
  });

  it('stops at the first boundary of a chunk, and reads nothing when already at one', () => {
    const cursor = new FrameCursor();
    expect(cursor.advance(stream, true)).toBe(0);
    cursor.advance(stream.subarray(0, 3));
    expect(cursor.atBoundary).toBe(false);
    expect(cursor.advance(stream.subarray(3), true)).toBe(boundaries[2]! - 3);
    expect(cursor.atBoundary).toBe(true);
  });
});

describe('closeFrame', () => {
  it('writes a Close with its code and reason, masked towards a server', () => {
    const plain = closeFrame(1008, 'The access token expired.', false);
    expect(plain.subarray(0, 2)).toEqual(Buffer.from([0x88, 27]));
    expect(plain.readUInt16BE(2)).toBe(1008);
    expect(plain.subarray(4).toString()).toBe('The access token expired.');

    const masked = closeFrame(1008, 'The access token expired.', true);
    expect(masked.subarray(0, 2)).toEqual(Buffer.from([0x88, 0x80 | 27]));
    const mask = masked.subarray(2, 6);
    const payload = Buffer.from(masked.subarray(6).map((b, i) => b ^ mask[i % 4]!));
    expect(payload.readUInt16BE(0)).toBe(1008);
    expect(payload.subarray(2).toString()).toBe('The access token expired.');
    const cursor = new FrameCursor();
    cursor.advance(Buffer.concat([plain, masked]));
    expect(cursor.atBoundary).toBe(true);
  });
});
