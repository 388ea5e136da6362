import { randomBytes } from 'node:crypto';

// Just enough of RFC 6455 §5.2 for the gateway to speak once in a tunnel it otherwise relays byte
// for byte: where one frame ends in a stream of them, and a Close frame of its own. Payloads are
// never read, so extensions (permessage-deflate) make no difference: control frames, Close among
// them, are never compressed (RFC 7692 §6.1), and they may come between the fragments of a message
// (RFC 6455 §5.4), so a Close at any frame boundary is well formed.

const MAX_HEADER_BYTES = 14;

/** Follows a stream of WebSocket frames (either direction, masked or not) to know where each ends. */
export class FrameCursor {
  private readonly header = Buffer.alloc(MAX_HEADER_BYTES);
  private headerBytes = 0;
  private payloadLeft = 0;

  /** Between two frames (or before the first): a frame of the gateway's own may go here. */
  get atBoundary(): boolean {
    return this.headerBytes === 0 && this.payloadLeft === 0;
  }

  /**
   * Reads `chunk` on; with `stopAtBoundary`, only up to the first frame boundary it reaches (0 when
   * already at one). Returns how many of its bytes were read.
   */
  advance(chunk: Buffer, stopAtBoundary = false): number {
    let at = 0;
    while (at < chunk.length) {
      if (stopAtBoundary && this.atBoundary) return at;
      if (this.payloadLeft > 0) {
        const n = Math.min(this.payloadLeft, chunk.length - at);
        this.payloadLeft -= n;
        at += n;
        continue;
      }
      this.header[this.headerBytes++] = chunk[at++]!;
      if (this.headerBytes >= 2 && this.headerBytes === headerLength(this.header)) {
        this.payloadLeft = payloadLength(this.header);
        this.headerBytes = 0;
      }
    }
    return at;
  }
}

/** Bytes of a frame header, from its second byte on: 2, then 2 or 8 of extended length, then 4 of mask. */
function headerLength(header: Buffer): number {
  const length7 = header[1]! & 0x7f;
  const extended = length7 === 126 ? 2 : length7 === 127 ? 8 : 0;
  return 2 + extended + (header[1]! & 0x80 ? 4 : 0);
}

function payloadLength(header: Buffer): number {
  const length7 = header[1]! & 0x7f;
  if (length7 === 126) return header.readUInt16BE(2);
  // At most 2^63 - 1 (§5.2); beyond 2^53 the count is approximate, and no stream gets that far.
  if (length7 === 127) return Number(header.readBigUInt64BE(2));
  return length7;
}

/**
 * A Close frame (§5.5.1) with a status code (§7.4.1) and a reason of at most 123 bytes; `masked`
 * for one sent towards a server, as every client frame must be (§5.3).
 */
export function closeFrame(code: number, reason: string, masked: boolean): Buffer {
  const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
  payload.writeUInt16BE(code, 0);
  payload.write(reason, 2);
  if (payload.length > 125) throw new Error('a close reason is at most 123 bytes');
  if (!masked) return Buffer.concat([Buffer.from([0x88, payload.length]), payload]);
  const mask = randomBytes(4);
  for (let i = 0; i < payload.length; i++) payload[i] = payload[i]! ^ mask[i % 4]!;
  return Buffer.concat([Buffer.from([0x88, 0x80 | payload.length]), mask, payload]);
}
