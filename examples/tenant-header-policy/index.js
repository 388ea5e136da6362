// @ts-check
// A tollgate policy (docs/plugins.md in tollgate): every request names its tenant in a header, and
// an API key acts for one tenant only: the tenants listed for it in the options, or else the
// first tenant it was used for, pinned in the policy's KV (Redis: every replica sees the pin).
import { definePolicy } from 'tollgate';

/** @typedef {{ header: string, pinSeconds: number, tenants: Record<string, string[]> }} Options */

const TENANT = /^[A-Za-z0-9._-]{1,64}$/;

export default definePolicy({
  name: 'tenant-header',
  /** @type {import('tollgate').JsonSchemaObject} */
  options: {
    type: 'object',
    properties: {
      // The request field naming the tenant.
      header: { type: 'string', pattern: '^[a-z0-9-]+$', default: 'x-tenant' },
      // How long a key stays pinned to the first tenant it acted for.
      pinSeconds: { type: 'integer', minimum: 1, maximum: 2592000, default: 86400 },
      // Tenants a key (by its id, or its owner) may act for; keys not listed are pinned instead.
      tenants: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string', pattern: TENANT.source } }, default: {} },
    },
    additionalProperties: false,
  },
  /** @param {Options} options */
  compile: (options) => options,
  errors: {
    tenant_missing: { status: 400, message: 'Name the tenant in the X-Tenant header.' },
    tenant_not_allowed: { status: 403, message: 'This API key may not act for this tenant.' },
  },
  async access(ctx, options) {
    const tenant = ctx.request.headers[options.header];
    if (typeof tenant !== 'string' || !TENANT.test(tenant)) return { refuse: 'tenant_missing' };
    const consumer = ctx.consumer;
    if (!consumer) return undefined;
    const listed = options.tenants[consumer.id] ?? (consumer.owner ? options.tenants[consumer.owner] : undefined);
    if (listed) return listed.includes(tenant) ? undefined : refused(ctx);
    // One round trip when the key is pinned already; the first request of a key pins it, atomically
    // across replicas (of two first requests for two tenants at once, one wins).
    const pin = `pin:${consumer.id}`;
    let pinned = await ctx.kv.get(pin);
    if (pinned === undefined) {
      if (await ctx.kv.add(pin, tenant, options.pinSeconds)) {
        ctx.metrics.count('pinned');
        ctx.log.info({ keyId: consumer.id, tenant }, 'key pinned to its tenant');
        return undefined;
      }
      pinned = await ctx.kv.get(pin);
    }
    return pinned === undefined || pinned === tenant ? undefined : refused(ctx);
  },
  beforeForward(ctx, options) {
    // The service reads the checked tenant under one name, whatever header the client used.
    const tenant = ctx.request.headers[options.header];
    if (typeof tenant === 'string') ctx.setRequestHeader('x-tenant-verified', tenant);
  },
});

/** @param {import('tollgate').PolicyContext} ctx */
function refused(ctx) {
  ctx.metrics.count('refused');
  return /** @type {const} */ ({ refuse: 'tenant_not_allowed' });
}
