import { createServer, connect, type Server, type Socket } from 'node:net';

interface Pair {
  client: Socket;
  upstream?: Socket;
  /** Bytes each way held back by a partition, delivered at the heal (as TCP retransmits them). */
  held: { toUpstream: Buffer[]; toClient: Buffer[] };
  clientGone: boolean;
  /** Everything its client sends is held (`holdFrom`) until `release`. */
  holding?: boolean;
  /** Chunks each way waiting out the latency, in their order, each with when it is due. */
  delayed: { toUpstream: Delayed[]; toClient: Delayed[] };
}

interface Delayed {
  atMs: number;
  send: () => void;
}

/**
 * A TCP proxy of the test's own between a gateway and its Redis, to break the path the ways a
 * network does: added latency, a partition without FIN (nothing passes either way, nobody is told;
 * what was sent meanwhile arrives at the heal, unless its sender reset the connection meanwhile,
 * as a reset discards what the kernel still held), and a reset of every connection.
 */
export class FaultProxy {
  private readonly pairs = new Set<Pair>();
  private partitioned = false;
  private latencyMs = 0;
  /** `holdFrom`'s marker, until a client sends it. */
  private holdMarker?: string;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly targetPort: number,
  ) {}

  static async start(targetPort: number): Promise<FaultProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new FaultProxy(server, (server.address() as { port: number }).port, targetPort);
    server.on('connection', (client) => proxy.accept(client));
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Every byte from now on waits `ms` more, each way. */
  latency(ms: number): void {
    this.latencyMs = ms;
  }

  partition(): void {
    this.partitioned = true;
  }

  heal(): void {
    this.partitioned = false;
    for (const pair of this.pairs) {
      if (pair.clientGone) {
        this.drop(pair);
        continue;
      }
      if (!pair.upstream) this.open(pair);
      for (const chunk of pair.held.toUpstream.splice(0)) pair.upstream!.write(chunk);
      for (const chunk of pair.held.toClient.splice(0)) pair.client.write(chunk);
    }
  }

  /**
   * From the first chunk a client sends that holds `marker` (a key's name in a command), that
   * chunk and everything its connection sends after it wait here until `release`, in order (the
   * replies match their commands again then); other connections pass.
   */
  holdFrom(marker: string): void {
    this.holdMarker = marker;
  }

  /** What the held connections sent since they were held, as text (RESP names keys literally). */
  heldText(): string {
    return [...this.pairs].flatMap((pair) => (pair.holding ? pair.held.toUpstream.map(String) : [])).join('');
  }

  /** Sends what `holdFrom` held, in order, and holds nothing more. */
  release(): void {
    this.holdMarker = undefined;
    for (const pair of this.pairs) {
      if (!pair.holding) continue;
      pair.holding = false;
      for (const chunk of pair.held.toUpstream.splice(0)) pair.upstream?.write(chunk);
    }
  }

  /** Resets every connection at once (RST both ways), as a crashed middlebox would. */
  reset(): void {
    for (const pair of this.pairs) {
      pair.client.resetAndDestroy();
      pair.upstream?.resetAndDestroy();
    }
    this.pairs.clear();
  }

  async stop(): Promise<void> {
    this.reset();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const pair: Pair = { client, held: { toUpstream: [], toClient: [] }, clientGone: false, delayed: { toUpstream: [], toClient: [] } };
    this.pairs.add(pair);
    client.on('data', (chunk) => this.pass(chunk, pair, 'toUpstream'));
    const gone = () => {
      pair.clientGone = true;
      // Its own end or reset reaches Redis only once the path is back.
      if (!this.partitioned) this.drop(pair);
    };
    client.on('close', gone);
    client.on('error', gone);
    // A connection opened during a partition hangs in its handshake's place until the heal.
    if (!this.partitioned) this.open(pair);
  }

  private open(pair: Pair): void {
    const upstream = connect(this.targetPort, '127.0.0.1');
    pair.upstream = upstream;
    upstream.on('data', (chunk) => this.pass(chunk, pair, 'toClient'));
    upstream.on('close', () => {
      if (this.partitioned) return;
      pair.client.destroy();
      this.pairs.delete(pair);
    });
    upstream.on('error', () => pair.client.destroy());
  }

  private pass(chunk: Buffer, pair: Pair, way: 'toUpstream' | 'toClient'): void {
    const send = () => {
      if (way === 'toUpstream' && !pair.holding && this.holdMarker !== undefined && chunk.includes(this.holdMarker)) {
        this.holdMarker = undefined;
        pair.holding = true;
      }
      if (way === 'toUpstream' && pair.holding) pair.held.toUpstream.push(chunk);
      else if (this.partitioned || (way === 'toUpstream' && !pair.upstream)) pair.held[way].push(chunk);
      else if (way === 'toUpstream') pair.upstream!.write(chunk);
      else pair.client.write(chunk);
    };
    // In order, as TCP delivers a stream: a chunk sent after the latency went down waits for
    // those still delayed before it (else a reply could overtake another, and the client take
    // each for the other's).
    const queue = pair.delayed[way];
    if (this.latencyMs === 0 && queue.length === 0) return send();
    queue.push({ atMs: Math.max(Date.now() + this.latencyMs, queue.at(-1)?.atMs ?? 0), send });
    if (queue.length === 1) this.drain(queue);
  }

  /** Delivers `queue`'s chunks as each falls due, in their order. */
  private drain(queue: Delayed[]): void {
    const next = queue[0];
    if (!next) return;
    setTimeout(
      () => {
        while (queue.length > 0 && queue[0]!.atMs <= Date.now()) queue.shift()!.send();
        this.drain(queue);
      },
      Math.max(0, next.atMs - Date.now()),
    );
  }

  private drop(pair: Pair): void {
    pair.upstream?.destroy();
    pair.client.destroy();
    this.pairs.delete(pair);
  }
}
