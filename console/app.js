// The operator console: a client of the admin API (openapi-admin.yaml), nothing more. Hash routes:
// #/overview, #/keys, #/keys/<id>, #/plans, #/audit. It shows only what the signed-in role may do
// (the session's `actions`); the admin API refuses the rest anyway.
import { api, currentSession, openIdSignIn, query, signIn, signOut, whenSignedOut } from './api.js';
import { announce, confirmAction, field, h, modal, svg, table, when } from './dom.js';

const main = document.getElementById('main');
const DECISIONS = ['admitted', 'limited', 'banned', 'unauthenticated', 'shadow_limited'];
let refreshTimer;
/** The signed-in session (actor, role, owner, email, actions). */
let session;
const may = (action) => Boolean(session?.actions.includes(action));
/** Who made a change, as the audit names them: the person's email, else the token's label or the subject. */
const who = (entry) => entry.email ?? entry.actor;

function show(title, ...content) {
  clearInterval(refreshTimer);
  document.title = `${title} · tollgate console`;
  main.replaceChildren(h('h1', {}, title), ...content.filter((part) => part !== null && part !== undefined));
}

const failed = (err) => announce(err.message, 'error');

// ---- Sign-in ---------------------------------------------------------------------------------
function signInPage(message) {
  document.getElementById('nav').hidden = true;
  document.getElementById('who').replaceChildren();
  const token = h('input', { type: 'password', name: 'token', autocomplete: 'off', required: true });
  const form = h(
    'form',
    {
      class: 'card narrow',
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          await signIn(token.value);
          token.value = '';
          announce('');
          await start();
        } catch (err) {
          token.value = '';
          announce(err.message, 'error');
          token.focus();
        }
      },
    },
    field('Admin token', token, 'A token of TOLLGATE_ADMIN_TOKENS. It is exchanged for a short session; the browser never stores it.'),
    h('button', { type: 'submit' }, 'Sign in'),
  );
  const returnTo = encodeURIComponent(`/admin/console/${location.hash}`);
  const openId = h(
    'p',
    { class: 'card narrow', id: 'oidc', hidden: true },
    h('a', { class: 'button', href: `/admin/console/oidc/start?return=${returnTo}` }, 'Sign in with your identity provider'),
  );
  show('Sign in', openId, form);
  openIdSignIn().then((on) => (openId.hidden = !on), failed);
  if (message) announce(message, 'error');
  token.focus();
}

async function start() {
  session = await currentSession();
  if (!session) return signInPage();
  document.getElementById('nav').hidden = false;
  const scope = session.owner ? `, keys of ${session.owner}` : '';
  document.getElementById('who').replaceChildren(
    h('span', { id: 'signed-in' }, `Signed in as ${session.email ?? session.actor} (${session.role}${scope})`),
    h(
      'button',
      {
        class: 'link',
        onclick: async () => {
          await signOut();
          session = undefined;
          location.hash = '#/overview';
          signInPage();
          announce('Signed out.');
        },
      },
      'Sign out',
    ),
  );
  await route();
}

whenSignedOut((message) => signInPage(message ?? 'Your session has ended; sign in again.'));

// ---- Overview --------------------------------------------------------------------------------
async function overviewPage() {
  show('Overview', h('p', {}, 'Loading…'));
  const draw = async () => {
    const [traffic, bans, services] = await Promise.all([
      may('traffic.read') ? api('GET', '/traffic?seconds=300&top=10') : null,
      api('GET', '/bans'),
      may('services.read') ? api('GET', '/services').catch(() => null) : null,
    ]);
    const bansTable = table(
      'Current bans',
      ['Key', 'Plan', 'Banned until', ''],
      bans.bans.map((b) => [h('a', { href: `#/keys/${b.id}` }, b.id), b.plan, when(b.bannedUntil), liftBanButton(b.id, overviewPage)]),
    );
    if (!traffic) {
      if (location.hash.startsWith('#/overview') || location.hash === '') main.replaceChildren(h('h1', {}, 'Overview'), bansTable);
      return;
    }
    const lastMinute = traffic.seconds.slice(-61, -1);
    const rate = (d) => (lastMinute.reduce((sum, s) => sum + s.counts[d], 0) / Math.max(1, lastMinute.length)).toFixed(2);
    const keyLink = (id) => h('a', { href: `#/keys/${id}` }, id);
    const content = [
      h(
        'section',
        { 'aria-labelledby': 'rps-h' },
        h('h2', { id: 'rps-h' }, 'Requests per second, last minute (this replica)'),
        h(
          'dl',
          { class: 'stats', id: 'rates' },
          DECISIONS.map((d) => [h('dt', { class: `d-${d}` }, d), h('dd', { 'data-decision': d }, rate(d))]),
        ),
        chart(traffic.seconds),
        h(
          'p',
          { class: 'muted' },
          `Totals over the last five minutes: ${DECISIONS.map((d) => `${d} ${traffic.seconds.reduce((s, x) => s + x.counts[d], 0)}`).join(', ')}.`,
        ),
      ),
      h(
        'div',
        { class: 'cols' },
        table(
          'Top keys by requests (5 min)',
          ['Key', 'Requests', 'Refusals'],
          traffic.topKeys.byRequests.map((k) => [keyLink(k.id), k.requests, k.refusals]),
        ),
        table(
          'Top keys by refusals (5 min)',
          ['Key', 'Refusals', 'Requests'],
          traffic.topKeys.byRefusals.map((k) => [keyLink(k.id), k.refusals, k.requests]),
        ),
      ),
      bansTable,
    ];
    if (services) content.push(servicesTable(services.services));
    if (location.hash.startsWith('#/overview') || location.hash === '') {
      const focused = document.activeElement?.id;
      main.replaceChildren(h('h1', {}, 'Overview'), ...content);
      if (focused) document.getElementById(focused)?.focus();
    }
  };
  await draw();
  refreshTimer = setInterval(() => {
    if (!document.getElementById('dialog').open) draw().catch(failed);
  }, 3000);
}

function chart(seconds) {
  const width = 600;
  const height = 120;
  const barWidth = width / seconds.length;
  const max = Math.max(1, ...seconds.map((s) => DECISIONS.reduce((sum, d) => sum + s.counts[d], 0)));
  const bars = [];
  seconds.forEach((s, i) => {
    let y = height;
    for (const d of DECISIONS) {
      const barHeight = (s.counts[d] / max) * height;
      if (barHeight <= 0) continue;
      y -= barHeight;
      bars.push(
        svg('rect', {
          x: (i * barWidth).toFixed(1),
          y: y.toFixed(1),
          width: barWidth.toFixed(2),
          height: barHeight.toFixed(1),
          class: `d-${d}`,
        }),
      );
    }
  });
  return svg(
    'svg',
    {
      viewBox: `0 0 ${width} ${height}`,
      class: 'chart',
      role: 'img',
      'aria-label': `Requests per second by decision over the last five minutes; peak ${max}`,
    },
    bars,
  );
}

function servicesTable(services) {
  const rows = services.flatMap((s) =>
    s.targets.map((t) => [
      s.name,
      t.url,
      t.inRotation ? 'in rotation' : t.ejected ? `ejected until ${when(t.ejectedUntil)}` : 'held out by health check',
      t.inFlight,
      t.ejections,
      cacheCell(s.cache),
    ]),
  );
  return table('Upstream health (this replica)', ['Service', 'Target', 'State', 'In flight', 'Ejections', 'Cache hit ratio'], rows);
}

/** A service's cache as this replica counted it: the hit ratio and its counts, or a dash without a cache. */
function cacheCell(cache) {
  if (!cache) return '—';
  if (cache.hitRatio === null) return `${cache.store}, no requests yet`;
  return `${(cache.hitRatio * 100).toFixed(1)} % (${cache.hits} hits, ${cache.misses} misses, ${cache.store})`;
}

function liftBanButton(id, after) {
  if (!may('keys.unban')) return null;
  return h(
    'button',
    {
      onclick: async () => {
        if (!(await confirmAction('Lift ban', `Lift the ban of key ${id} on every replica?`, 'Lift ban'))) return;
        try {
          const result = await api('DELETE', `/keys/${id}/ban`);
          if ((await after(id)) !== false) announce(result.unbanned ? `Ban of ${id} lifted.` : `${id} was not banned.`);
        } catch (err) {
          failed(err);
        }
      },
    },
    'Lift ban',
  );
}

// ---- Keys ------------------------------------------------------------------------------------
const keysState = { q: '', plan: '', status: '', cursors: [undefined] };

async function keysPage() {
  const plans = Object.keys((await api('GET', '/plans')).plans);
  const planSelect = (value, all) =>
    h(
      'select',
      {},
      all ? h('option', { value: '' }, 'any plan') : null,
      plans.map((p) => h('option', { value: p, selected: p === value }, p)),
    );
  const q = h('input', { type: 'search', value: keysState.q, placeholder: 'id, name or owner' });
  const plan = planSelect(keysState.plan, true);
  const status = h(
    'select',
    {},
    ['', 'active', 'expired', 'revoked'].map((s) => h('option', { value: s, selected: s === keysState.status }, s || 'any status')),
  );
  const results = h('div', {});
  const search = h(
    'form',
    {
      class: 'filters',
      role: 'search',
      onsubmit: (event) => {
        event.preventDefault();
        Object.assign(keysState, { q: q.value, plan: plan.value, status: status.value, cursors: [undefined] });
        list().catch(failed);
      },
    },
    field('Search', q),
    field('Plan', plan),
    field('Status', status),
    h('button', { type: 'submit' }, 'Search'),
  );

  async function list() {
    const cursor = keysState.cursors[keysState.cursors.length - 1];
    const page = await api('GET', `/keys${query({ q: keysState.q, plan: keysState.plan, status: keysState.status, cursor, limit: 20 })}`);
    const rows = page.keys.map((k) => [
      h('a', { href: `#/keys/${k.id}` }, k.id),
      k.name,
      k.owner ?? '',
      k.plan,
      k.status,
      when(k.expiresAt),
    ]);
    const nav = h(
      'div',
      { class: 'actions' },
      h(
        'button',
        {
          disabled: keysState.cursors.length === 1,
          onclick: () => {
            keysState.cursors.pop();
            list().catch(failed);
          },
        },
        'Previous page',
      ),
      h(
        'button',
        {
          disabled: !page.next,
          onclick: () => {
            keysState.cursors.push(page.next);
            list().catch(failed);
          },
        },
        'Next page',
      ),
    );
    results.replaceChildren(
      table(`Keys, page ${keysState.cursors.length}`, ['Id', 'Name', 'Owner', 'Plan', 'Status', 'Expires'], rows),
      nav,
    );
  }

  const newPlan = planSelect(plans[0], false);
  const name = h('input', { name: 'name', maxlength: 200 });
  // A principal limited to one owner creates keys of that owner only.
  const owner = h('input', {
    name: 'owner',
    pattern: '[a-z0-9][a-z0-9._-]{0,63}',
    value: session.owner ?? '',
    readonly: Boolean(session.owner),
  });
  const expires = h('input', { type: 'datetime-local', name: 'expiresAt' });
  const perMinute = h('input', { type: 'number', min: 1, name: 'perMinute' });
  const perDay = h('input', { type: 'number', min: 1, name: 'perDay' });
  const cidrs = h('input', { name: 'allowedCidrs', placeholder: '198.51.100.0/24 2001:db8::/32' });
  const scopes = h('input', { name: 'scopes', placeholder: 'categories:read categories:write' });
  const create = h(
    'form',
    {
      class: 'card',
      'aria-labelledby': 'create-h',
      onsubmit: async (event) => {
        event.preventDefault();
        const body = { plan: newPlan.value };
        if (name.value) body.name = name.value;
        if (owner.value) body.owner = owner.value;
        if (expires.value) body.expiresAt = new Date(expires.value).toISOString();
        if (perMinute.value || perDay.value) Object.assign(body, { perMinute: Number(perMinute.value), perDay: Number(perDay.value) });
        if (cidrs.value.trim()) body.allowedCidrs = networks(cidrs.value);
        if (scopes.value.trim()) body.scopes = scopeNames(scopes.value);
        try {
          const created = await api('POST', '/keys', body);
          create.reset();
          await showSecret('Key created', created);
          await list();
        } catch (err) {
          failed(err);
        }
      },
    },
    h('h2', { id: 'create-h' }, 'Create a key'),
    h(
      'div',
      { class: 'row' },
      field('Plan', newPlan),
      field('Name', name),
      field('Owner', owner, 'optional'),
      field('Expires', expires, 'optional, local time'),
      field('Per minute', perMinute, 'own quota, optional'),
      field('Per day', perDay),
      field('Networks', cidrs, 'optional: the only CIDRs it may be used from, space-separated'),
      field('Scopes', scopes, 'optional: what it may do, space-separated'),
    ),
    h('button', { type: 'submit' }, 'Create key'),
  );

  show('Keys', search, results, may('keys.create') ? create : null);
  await list();
}

/** A space- or comma-separated list of CIDRs, as typed; the admin API checks each one. */
function networks(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

/** A space-separated list of scopes, as typed (a scope name may hold a comma); the admin API checks each one. */
function scopeNames(text) {
  return text.split(/\s+/).filter(Boolean);
}

async function showSecret(title, record) {
  const secret = h('input', { readonly: true, value: record.key, class: 'secret', 'aria-label': 'The new API key' });
  const copied = h('span', { role: 'status' });
  const copy = h(
    'button',
    {
      type: 'button',
      onclick: async () => {
        secret.select();
        try {
          await navigator.clipboard.writeText(record.key);
          copied.textContent = 'Copied.';
        } catch {
          copied.textContent = 'Selected: press Ctrl+C to copy.';
        }
      },
    },
    'Copy',
  );
  await modal(
    title,
    h(
      'div',
      {},
      h('p', {}, `Key ${record.id}. This secret is shown once; store it now.`),
      h('div', { class: 'row' }, secret, copy),
      copied,
    ),
    [{ value: 'done', label: 'Done' }],
  );
  secret.value = '';
}

// ---- Key detail ------------------------------------------------------------------------------
async function keyPage(id) {
  const [record, plans, traffic, audit] = await Promise.all([
    api('GET', `/keys/${id}`),
    api('GET', '/plans'),
    may('traffic.read') ? api('GET', '/traffic?seconds=1&top=100') : null,
    api('GET', `/audit${query({ keyId: id, limit: 20 })}`),
  ]);
  const [usage, credits] = await Promise.all([
    record.status === 'revoked' ? null : api('GET', `/keys/${id}/usage`).catch(() => null),
    api('GET', `/keys/${id}/credits`).catch(() => null),
  ]);
  // False when the page could not be shown again (its error is told instead of the change's success).
  const reload = () =>
    keyPage(id).then(
      () => true,
      (err) => {
        failed(err);
        return false;
      },
    );
  const change = async (body, message) => {
    try {
      await api('PATCH', `/keys/${id}`, body);
      // Told once the page shows it: a form filled after the message is not wiped by the reload.
      if (await reload()) announce(message);
    } catch (err) {
      failed(err);
    }
  };

  const facts = h(
    'dl',
    { class: 'facts' },
    [
      ['Name', record.name],
      ['Owner', record.owner ?? '—'],
      ['Plan', record.plan],
      ['Status', record.status],
      ['Created', when(record.createdAt)],
      ['Expires', when(record.expiresAt)],
      ['Own quota', record.perMinute ? `${record.perMinute}/min, ${record.perDay}/day` : 'the plan’s'],
      ['Own month', record.perMonth ? `${record.perMonth}/month` : 'the plan’s'],
      ['Own max in flight', record.maxConcurrent ? `${record.maxConcurrent} at once` : 'the plan’s'],
      ['Billing anchor', record.billingAnchor ? `months begin on day ${Number(record.billingAnchor.slice(8))}` : 'calendar months'],
      ['Networks', record.allowedCidrs ? record.allowedCidrs.join(' ') : 'any'],
      ['Scopes', record.scopes ? record.scopes.join(' ') : 'none'],
      ['Previous secret works until', when(record.graceEndsAt)],
    ].map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
  );

  const windows = usage
    ? h(
        'section',
        { 'aria-labelledby': 'usage-h' },
        h('h2', { id: 'usage-h' }, 'Usage'),
        ['minute', 'day', 'month']
          .filter((w) => usage[w])
          .map((w) =>
            h(
              'div',
              { class: 'window' },
              h('span', {}, `This ${w}: ${usage[w].used} / ${usage[w].limit} used, resets ${when(usage[w].resetAt)}`),
              h('meter', { min: 0, max: usage[w].limit, value: Math.min(usage[w].used, usage[w].limit), 'aria-label': `${w} window used` }),
            ),
          ),
        h('p', { id: 'ban-state' }, usage.bannedUntil ? `Banned until ${when(usage.bannedUntil)}.` : 'Not banned.'),
        usage.bannedUntil ? liftBanButton(id, reload) : null,
      )
    : null;

  const mine = traffic?.topKeys.byRequests.find((k) => k.id === id);
  const refusals = traffic
    ? h(
        'p',
        { id: 'refusals' },
        mine
          ? `Last 5 minutes on this replica: ${mine.requests} requests, ${mine.refusals} refused (limited or banned).`
          : 'No requests in the last 5 minutes on this replica.',
      )
    : null;

  const actions = [];
  if (record.status !== 'revoked' && may('keys.update')) {
    const plan = h(
      'select',
      {},
      Object.keys(plans.plans).map((p) => h('option', { value: p, selected: p === record.plan }, p)),
    );
    const perMinute = h('input', { type: 'number', min: 1, value: record.perMinute ?? '' });
    const perDay = h('input', { type: 'number', min: 1, value: record.perDay ?? '' });
    const perMonth = h('input', { type: 'number', min: 1, value: record.perMonth ?? '' });
    const maxConcurrent = h('input', { type: 'number', min: 1, value: record.maxConcurrent ?? '' });
    const anchor = h('input', { type: 'date', value: record.billingAnchor ?? '' });
    const expires = h('input', { type: 'datetime-local' });
    const grace = h('input', { type: 'number', min: 0, max: 2592000, value: 3600 });
    const cidrs = h('input', { value: (record.allowedCidrs ?? []).join(' '), placeholder: '198.51.100.0/24 2001:db8::/32' });
    const keyScopes = h('input', { value: (record.scopes ?? []).join(' '), placeholder: 'categories:read categories:write' });
    const form = (label, inputs, onsubmit, extra) =>
      h(
        'form',
        {
          class: 'row card',
          'aria-label': label,
          onsubmit: (e) => {
            e.preventDefault();
            onsubmit();
          },
        },
        inputs,
        h('button', { type: 'submit' }, label),
        extra,
      );
    actions.push(
      form('Change plan', field('Plan', plan), () => change({ plan: plan.value }, `Plan of ${id} is now ${plan.value}.`)),
      form(
        'Set quota',
        [field('Per minute', perMinute), field('Per day', perDay)],
        () => change({ perMinute: Number(perMinute.value), perDay: Number(perDay.value) }, 'Quota set.'),
        h(
          'button',
          { type: 'button', onclick: () => change({ perMinute: null, perDay: null }, 'Back to the plan’s quota.') },
          'Clear quota',
        ),
      ),
      form('Set month', [field('Per month', perMonth), field('Billing anchor (its day of the month begins each month)', anchor)], () =>
        change({ perMonth: perMonth.value ? Number(perMonth.value) : null, billingAnchor: anchor.value || null }, 'Month set.'),
      ),
      form('Set max in flight', field('Requests and tunnels at once (empty: the plan’s)', maxConcurrent), () =>
        change({ maxConcurrent: maxConcurrent.value ? Number(maxConcurrent.value) : null }, 'Concurrency limit set.'),
      ),
      form(
        'Set expiry',
        field('Expires at', expires, 'local time'),
        () => change({ expiresAt: expires.value ? new Date(expires.value).toISOString() : null }, 'Expiry set.'),
        h('button', { type: 'button', onclick: () => change({ expiresAt: null }, 'Expiry cleared.') }, 'Clear expiry'),
      ),
      form(
        'Set networks',
        field('Networks', cidrs, 'the only CIDRs the key may be used from, space-separated'),
        () => change({ allowedCidrs: cidrs.value.trim() ? networks(cidrs.value) : null }, 'Networks set.'),
        h('button', { type: 'button', onclick: () => change({ allowedCidrs: null }, 'Usable from any network.') }, 'Any network'),
      ),
      form(
        'Set scopes',
        field('Scopes', keyScopes, 'what the key may do, space-separated'),
        () => change({ scopes: keyScopes.value.trim() ? scopeNames(keyScopes.value) : null }, 'Scopes set.'),
        h('button', { type: 'button', onclick: () => change({ scopes: null }, 'No scopes.') }, 'No scopes'),
      ),
      form('Rotate', field('Grace seconds', grace, 'how long the old secret keeps working'), async () => {
        if (!(await confirmAction('Rotate key', `Give ${id} a new secret? The old one works for ${grace.value} more seconds.`, 'Rotate')))
          return;
        try {
          const rotated = await api('POST', `/keys/${id}/rotate`, { graceSeconds: Number(grace.value) });
          await showSecret('Key rotated', rotated);
          if (await reload()) announce(`${id} rotated.`);
        } catch (err) {
          failed(err);
        }
      }),
      h(
        'div',
        { class: 'card' },
        h(
          'button',
          {
            class: 'danger',
            onclick: async () => {
              if (
                !(await confirmAction(
                  'Revoke key',
                  `Revoke ${id}? It is refused on every replica within a second. This cannot be undone.`,
                  'Revoke',
                ))
              )
                return;
              try {
                await api('DELETE', `/keys/${id}`);
                if (await reload()) announce(`${id} revoked.`);
              } catch (err) {
                failed(err);
              }
            },
          },
          'Revoke key',
        ),
      ),
    );
  }

  const trail = table(
    'Audit trail of this key',
    ['When', 'Actor', 'Role', 'Action', 'Changes'],
    audit.entries.map((e) => [when(e.at), who(e), e.role ?? '—', e.action, changesText(e.changes, e.reason)]),
  );
  show(
    `Key ${id}`,
    facts,
    windows,
    creditsSection(id, credits, reload),
    refusals,
    h('section', { 'aria-label': 'Actions' }, actions),
    trail,
  );
}

/**
 * The prepaid balance of the key (its owner's under a `scope: owner` plan), and, for a role that
 * may change it (keys.credits: operator, admin), a form to add to it or set it, with the reason
 * the audit keeps. Viewers see the balance only.
 */
function creditsSection(id, credits, after) {
  if (!credits) return null;
  const whose = credits.subject.startsWith('owner:') ? ` (owner ${credits.subject.slice(6)}’s, shared by its keys)` : '';
  const required = credits.required ? 'spent by every request: its plan requires credits' : 'its plan does not require credits';
  const parts = [
    h('h2', { id: 'credits-h' }, 'Credits'),
    h('p', { id: 'credit-balance' }, `Balance: ${credits.credits}${whose}; ${required}.`),
  ];
  if (may('keys.credits')) {
    const mode = h('select', {}, h('option', { value: 'add' }, 'Add'), h('option', { value: 'set' }, 'Set to'));
    const amount = h('input', { type: 'number', step: 1, required: true });
    const reason = h('input', { required: true, maxlength: 500, placeholder: 'order 1001 paid' });
    parts.push(
      h(
        'form',
        {
          class: 'row card',
          'aria-label': 'Change credits',
          onsubmit: async (e) => {
            e.preventDefault();
            try {
              const changed = await api('POST', `/keys/${id}/credits`, { [mode.value]: Number(amount.value), reason: reason.value });
              if ((await after()) !== false) announce(`Credits of ${id}: ${changed.credits}.`);
            } catch (err) {
              failed(err);
            }
          },
        },
        field('Change', mode),
        field('Credits', amount, 'a negative number takes away; never below zero'),
        field('Reason', reason, 'kept in the audit'),
        h('button', { type: 'submit' }, 'Change credits'),
      ),
    );
  }
  return h('section', { 'aria-labelledby': 'credits-h' }, parts);
}

const changesText = (changes, reason) =>
  Object.entries(changes)
    .map(([f, c]) => `${f}: ${JSON.stringify(c.before)} → ${JSON.stringify(c.after)}`)
    .concat(reason ? [`reason: ${reason}`] : [])
    .join('; ');

// ---- Plans and audit -------------------------------------------------------------------------
async function plansPage() {
  const { plans, ban, loadedAt } = await api('GET', '/plans');
  const rows = Object.entries(plans).map(([name, p]) => [
    name,
    p.perMinute,
    p.perDay,
    p.perMonth ?? '—',
    p.algorithm ?? 'fixed',
    p.scope ?? 'key',
    p.burst ?? '—',
    p.shadow ? 'yes' : 'no',
  ]);
  show(
    'Plans',
    h('p', {}, `As loaded by this replica from plans.yaml at ${when(loadedAt)}; change them there (read-only here).`),
    table('Plans', ['Plan', 'Per minute', 'Per day', 'Per month', 'Algorithm', 'Scope', 'Burst', 'Shadow'], rows),
    h('p', {}, `Bans: after ${ban.afterRejections} refusals within ${ban.window} s, for ${ban.duration} s.`),
  );
}

const auditState = { keyId: '', actor: '', action: '', cursors: [undefined] };

async function auditPage() {
  const keyId = h('input', { value: auditState.keyId });
  const actor = h('input', { value: auditState.actor });
  const action = h(
    'select',
    {},
    ['', 'key.create', 'key.update', 'key.revoke', 'key.rotate', 'key.unban', 'key.credits'].map((a) =>
      h('option', { value: a, selected: a === auditState.action }, a || 'any action'),
    ),
  );
  const results = h('div', {});
  async function list() {
    const cursor = auditState.cursors[auditState.cursors.length - 1];
    const page = await api(
      'GET',
      `/audit${query({ keyId: auditState.keyId, actor: auditState.actor, action: auditState.action, cursor, limit: 25 })}`,
    );
    results.replaceChildren(
      table(
        `Audit, page ${auditState.cursors.length}`,
        ['When', 'Actor', 'Role', 'Action', 'Key', 'Changes'],
        page.entries.map((e) => [
          when(e.at),
          who(e),
          e.role ?? '—',
          e.action,
          h('a', { href: `#/keys/${e.keyId}` }, e.keyId),
          changesText(e.changes, e.reason),
        ]),
      ),
      h(
        'div',
        { class: 'actions' },
        h(
          'button',
          {
            disabled: auditState.cursors.length === 1,
            onclick: () => {
              auditState.cursors.pop();
              list().catch(failed);
            },
          },
          'Newer',
        ),
        h(
          'button',
          {
            disabled: !page.next,
            onclick: () => {
              auditState.cursors.push(page.next);
              list().catch(failed);
            },
          },
          'Older',
        ),
      ),
    );
  }
  const filters = h(
    'form',
    {
      class: 'filters',
      role: 'search',
      onsubmit: (event) => {
        event.preventDefault();
        Object.assign(auditState, { keyId: keyId.value.trim(), actor: actor.value.trim(), action: action.value, cursors: [undefined] });
        list().catch(failed);
      },
    },
    field('Key id', keyId),
    field('Actor', actor, 'a token’s label, a person’s email or subject'),
    field('Action', action),
    h('button', { type: 'submit' }, 'Filter'),
  );
  show('Audit', filters, results);
  await list();
}

// ---- Routing ---------------------------------------------------------------------------------
async function route() {
  const path = location.hash.slice(1) || '/overview';
  for (const link of document.querySelectorAll('#nav a')) {
    if (path.startsWith(link.getAttribute('href').slice(1))) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const keyMatch = /^\/keys\/([0-9a-z]{12})$/.exec(path);
  try {
    if (keyMatch) await keyPage(keyMatch[1]);
    else if (path === '/keys') await keysPage();
    else if (path === '/plans') await plansPage();
    else if (path === '/audit') await auditPage();
    else await overviewPage();
  } catch (err) {
    if (err.status !== 401) failed(err);
  }
}

window.addEventListener('hashchange', () => {
  announce('');
  route().then(() => main.focus());
});
start().catch(failed);
