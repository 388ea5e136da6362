import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

// A real OTLP/HTTP trace receiver for tests: it accepts POST /v1/traces as the OpenTelemetry
// exporters send it, http/json (application/json) or http/protobuf (application/x-protobuf),
// and decodes both into one shape. The protobuf decoding reads the wire format field by field
// after opentelemetry-proto's trace.proto (the OTel JS packages ship a writer, not a reader).

export type AttributeValue = string | number | boolean | null;

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: number;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the export requests received, in order. */
  contentTypes: string[];
  /** Every raw request body, for the no-secrets search. */
  rawBodies: Buffer[];
  /** Resolves once `count` spans matching `match` have arrived. */
  waitFor(match: (span: ReceivedSpan) => boolean, count?: number, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

/** `hang`: accept export requests and never answer them (a stuck receiver). */
export async function startOtlpReceiver(mode: 'ok' | 'hang' = 'ok'): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const rawBodies: Buffer[] = [];
  const held: ServerResponse[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (mode === 'hang') return void held.push(res);
      const body = Buffer.concat(chunks);
      const type = String(req.headers['content-type'] ?? '');
      contentTypes.push(type);
      rawBodies.push(body);
      try {
        spans.push(...(type.includes('json') ? fromJson(JSON.parse(body.toString('utf8'))) : fromProtobuf(body)));
      } catch (err) {
        res.statusCode = 400;
        return res.end(String(err));
      }
      res.setHeader('content-type', type.includes('json') ? 'application/json' : 'application/x-protobuf');
      res.end(type.includes('json') ? '{}' : Buffer.alloc(0));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    rawBodies,
    async waitFor(match, count = 1, timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = spans.filter(match);
        if (found.length >= count) return found;
        if (Date.now() > until)
          throw new Error(`${found.length} of ${count} spans after ${timeoutMs} ms; got: ${spans.map((s) => s.name).join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// --- http/json (OTLP JSON encoding: ids as hex strings, int64 as strings) -------------------------

interface JsonValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
}
type JsonAttributes = Array<{ key: string; value: JsonValue }> | undefined;

function jsonAttributes(list: JsonAttributes): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) {
    out[key] =
      value.stringValue ?? value.boolValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? null));
  }
  return out;
}

function fromJson(body: any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const service = String(jsonAttributes(rs.resource?.attributes)['service.name']);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        out.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          traceState: s.traceState ?? '',
          name: s.name,
          kind: s.kind,
          attributes: jsonAttributes(s.attributes),
          status: s.status?.code ?? 0,
        });
  }
  return out;
}

// --- http/protobuf -------------------------------------------------------------------------------

/** The fields of one message: field number → values (bytes for length-delimited, numbers/bigints else). */
function fields(buf: Buffer): Map<number, Array<Buffer | bigint>> {
  const out = new Map<number, Array<Buffer | bigint>>();
  let pos = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buf[pos++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (pos < buf.length) {
    const tag = Number(varint());
    const field = tag >>> 3;
    const wire = tag & 7;
    let value: Buffer | bigint;
    if (wire === 0) value = varint();
    else if (wire === 1) {
      value = buf.readBigUInt64LE(pos);
      pos += 8;
    } else if (wire === 2) {
      const length = Number(varint());
      value = buf.subarray(pos, pos + length);
      pos += length;
    } else if (wire === 5) {
      value = BigInt(buf.readUInt32LE(pos));
      pos += 4;
    } else throw new Error(`unexpected wire type ${wire}`);
    if (!out.has(field)) out.set(field, []);
    out.get(field)!.push(value);
  }
  return out;
}

const bytes = (m: Map<number, Array<Buffer | bigint>>, n: number): Buffer[] => (m.get(n) ?? []) as Buffer[];
const str = (m: Map<number, Array<Buffer | bigint>>, n: number) => bytes(m, n)[0]?.toString('utf8') ?? '';
const hex = (m: Map<number, Array<Buffer | bigint>>, n: number) => bytes(m, n)[0]?.toString('hex') ?? '';
const num = (m: Map<number, Array<Buffer | bigint>>, n: number) => Number((m.get(n)?.[0] as bigint | undefined) ?? 0n);

/** KeyValue { key = 1; AnyValue value = 2 }; AnyValue { string 1, bool 2, int 3, double 4 }. */
function protoAttributes(list: Buffer[]): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of list) {
    const pair = fields(kv);
    const value = fields(bytes(pair, 2)[0] ?? Buffer.alloc(0));
    let decoded: AttributeValue = null;
    if (value.has(1)) decoded = str(value, 1);
    else if (value.has(2)) decoded = num(value, 2) === 1;
    else if (value.has(3)) decoded = Number(BigInt.asIntN(64, value.get(3)![0] as bigint));
    else if (value.has(4)) {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(value.get(4)![0] as bigint);
      decoded = b.readDoubleLE(0);
    }
    out[str(pair, 1)] = decoded;
  }
  return out;
}

/**
 * ExportTraceServiceRequest { ResourceSpans resource_spans = 1 }; ResourceSpans { Resource
 * resource = 1; ScopeSpans scope_spans = 2 }; ScopeSpans { Span spans = 2 }; Span { trace_id 1,
 * span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6, attributes 9, status 15 }.
 */
function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rsBuf of bytes(fields(body), 1)) {
    const rs = fields(rsBuf);
    const resource = fields(bytes(rs, 1)[0] ?? Buffer.alloc(0));
    const service = String(protoAttributes(bytes(resource, 1))['service.name']);
    for (const ssBuf of bytes(rs, 2))
      for (const spanBuf of bytes(fields(ssBuf), 2)) {
        const s = fields(spanBuf);
        out.push({
          service,
          traceId: hex(s, 1),
          spanId: hex(s, 2),
          traceState: str(s, 3),
          parentSpanId: hex(s, 4),
          name: str(s, 5),
          kind: num(s, 6),
          attributes: protoAttributes(bytes(s, 9)),
          status: num(fields(bytes(s, 15)[0] ?? Buffer.alloc(0)), 3),
        });
      }
  }
  return out;
}
