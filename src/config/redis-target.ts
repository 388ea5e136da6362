// Where Redis is, as configured: one server, a Redis Cluster, or a master watched by Sentinel.
// Pure parsing and describing; connect.ts turns a target into a client.

export interface RedisTarget {
  /** One server: redis://[user:password@]host:port[/db], or rediss:// for TLS. */
  url?: string;
  /** Redis Cluster seed nodes (the others are discovered): host:port or redis[s]://[user:password@]host:port. */
  clusterNodes?: readonly string[];
  /** Sentinels watching the master, same syntax as clusterNodes. */
  sentinels?: readonly string[];
  /** The master's name in the Sentinel configuration (`sentinel monitor <name> …`). */
  sentinelMaster?: string;
}

export interface RedisNode {
  host: string;
  port: number;
}

/** Nodes of a Cluster or Sentinel target, with the credentials and TLS they share. */
export interface NodeList {
  nodes: RedisNode[];
  username?: string;
  password?: string;
  tls: boolean;
}

export type RedisTopology = 'none' | 'single' | 'cluster' | 'sentinel';

export function topologyOf(target: string | RedisTarget | undefined): RedisTopology {
  const t = asTarget(target);
  if (t.clusterNodes?.length) return 'cluster';
  if (t.sentinels?.length) return 'sentinel';
  return t.url ? 'single' : 'none';
}

export function asTarget(target: string | RedisTarget | undefined): RedisTarget {
  return typeof target === 'string' ? { url: target } : (target ?? {});
}

/** `a:1, b:2` → ['a:1', 'b:2'] (the environment's comma-separated form). */
export function splitNodeList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Why one node entry is not usable, or undefined when it is. */
export function nodeEntryError(entry: string): string | undefined {
  const parsed = parseNodeEntry(entry);
  return typeof parsed === 'string' ? parsed : undefined;
}

/** Parses node entries; throws on the first bad one (settings validate them earlier, with file and field). */
export function parseNodeList(entries: readonly string[]): NodeList {
  const list: NodeList = { nodes: [], tls: false };
  for (const entry of entries) {
    const parsed = parseNodeEntry(entry);
    if (typeof parsed === 'string') throw new Error(`Redis node "${entry}": ${parsed}`);
    list.nodes.push({ host: parsed.host, port: parsed.port });
    // Credentials and TLS apply to every node (a Cluster announces its nodes without them).
    list.username ??= parsed.username;
    list.password ??= parsed.password;
    list.tls ||= parsed.tls;
  }
  return list;
}

/** For logs and messages: never a password. */
export function describeRedis(target: string | RedisTarget | undefined): string {
  const t = asTarget(target);
  switch (topologyOf(t)) {
    case 'cluster':
      return `cluster ${parseNodeList(t.clusterNodes!).nodes.map(hostPort).join(',')}`;
    case 'sentinel':
      return `sentinel ${t.sentinelMaster ?? 'mymaster'}@${parseNodeList(t.sentinels!).nodes.map(hostPort).join(',')}`;
    case 'single':
      return redactUrl(t.url!);
    case 'none':
      return 'embedded store';
  }
}

/** The URL with any password masked. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable Redis URL)';
  }
}

const hostPort = (n: RedisNode) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`);

interface NodeEntry extends RedisNode {
  username?: string;
  password?: string;
  tls: boolean;
}

function parseNodeEntry(entry: string): NodeEntry | string {
  const isUrl = /^rediss?:\/\//.test(entry);
  let url: URL;
  try {
    url = new URL(isUrl ? entry : `redis://${entry}`);
  } catch {
    return 'expected host:port or redis://[user:password@]host:port';
  }
  if (!url.hostname || !url.port || (url.pathname !== '' && url.pathname !== '/') || url.search || url.hash) {
    return 'expected host:port or redis://[user:password@]host:port';
  }
  if (!isUrl && (url.username || url.password)) return 'credentials need the redis://user:password@host:port form';
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: Number(url.port),
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    tls: url.protocol === 'rediss:',
  };
}
