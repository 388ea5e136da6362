// The policies' key-value store (docs/plugins.md, "KV"): one per process, each policy seeing only
// its own namespace (gateway/user-policies/policy-context.ts). Values are short strings with a TTL.

export interface PolicyKvStore {
  get(namespace: string, key: string): Promise<string | undefined>;
  set(namespace: string, key: string, value: string, ttlSeconds: number): Promise<void>;
  /** Sets only when nothing is stored: true when it did. */
  add(namespace: string, key: string, value: string, ttlSeconds: number): Promise<boolean>;
  delete(namespace: string, key: string): Promise<void>;
}

export const KV_MAX_KEY_LENGTH = 256;
export const KV_MAX_VALUE_BYTES = 64 * 1024;
export const KV_MAX_TTL_SECONDS = 30 * 86_400;

/** Why a key, value or TTL is refused (thrown as a TypeError by the caller), or undefined. */
export function kvArgumentProblem(key: string, value?: string, ttlSeconds?: number): string | undefined {
  if (typeof key !== 'string' || key.length === 0 || key.length > KV_MAX_KEY_LENGTH || /[\x00-\x1f\x7f]/.test(key))
    return `a KV key must be 1-${KV_MAX_KEY_LENGTH} characters without control characters`;
  if (value !== undefined && (typeof value !== 'string' || Buffer.byteLength(value) > KV_MAX_VALUE_BYTES))
    return `a KV value must be a string of at most ${KV_MAX_VALUE_BYTES} bytes`;
  if (ttlSeconds !== undefined && (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > KV_MAX_TTL_SECONDS))
    return `a KV TTL must be whole seconds from 1 to ${KV_MAX_TTL_SECONDS}`;
  return undefined;
}
