import type { QuotaNotice, QuotaStore } from '../store/quota-store.js';

type Listen = (apply: (notice: QuotaNotice) => void, gap: () => void) => void;

/**
 * The store's lease notices, heard by several listeners (the plans' leases and the rules':
 * quota-leases.ts, rule-leases.ts) over the store's one subscription, made at the first listener.
 * Each listener picks its own subjects out. `heard` counts each notice once.
 */
export function noticeListeners(store: Pick<QuotaStore, 'notices'>, heard: () => void): Listen {
  const listeners: Array<{ apply: (notice: QuotaNotice) => void; gap: () => void }> = [];
  return (apply, gap) => {
    listeners.push({ apply, gap });
    if (listeners.length > 1) return;
    store.notices?.(
      (notice) => {
        heard();
        for (const listener of listeners) listener.apply(notice);
      },
      () => {
        for (const listener of listeners) listener.gap();
      },
    );
  };
}
