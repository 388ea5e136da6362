/**
 * How many of a gateway's quota decisions were answered from a lease (no Redis round trip), from
 * its /metrics (`tollgate_quota_decisions_total` by `source`): what tells a many-keys row whose keys
 * took warm leases from one whose every request was a quota script call.
 */
export interface DecisionCounts {
  leased: number;
  all: number;
}

/** The decisions counted so far by the gateways at these admin URLs (those without one count nothing). */
export async function decisionCounts(adminUrls: Array<string | undefined>): Promise<DecisionCounts> {
  const counts = { leased: 0, all: 0 };
  for (const adminUrl of adminUrls) {
    if (!adminUrl) continue;
    const text = await (await fetch(`${adminUrl}/metrics`)).text();
    for (const m of text.matchAll(/^tollgate_quota_decisions_total\{([^}]*)\} (\d+)/gm)) {
      counts.all += Number(m[2]);
      if (/source="lease"/.test(m[1]!)) counts.leased += Number(m[2]);
    }
  }
  return counts;
}
