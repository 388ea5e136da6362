import { BaseSequencer, type TestSpecification } from 'vitest/node';

// The suite's longest files, longest first, as measured (`npx vitest run --reporter=json`): they
// start before all others, so that both workers stay busy to the end and no long file started late
// becomes the suite's tail. Vitest orders by the durations it cached on an earlier run, but a CI
// checkout has none and then it starts the largest files first, and some of the longest are small
// (they wait for minute edges, or send 50,000 requests). Files not listed keep vitest's order.
const LONGEST = [
  'quota-loaded-exact',
  'quota-leases',
  'rule-leases',
  'keys-cli',
  'ws-key-expiry',
  'kubernetes-lifecycle',
  // Not beside quota-loaded-exact (its two busy loops and 90 request loops take both cores for two
  // minutes): the files above outlast it. Started second, the soak's 50,000 requests were starved
  // there (65 of its warm-up's 10,000 failed on a machine shared with other suites).
  'soak',
  'quota-leases-burst',
  'gateway-assertion',
  'credits',
  'example-tenant-policy',
  'upstream-keep-alive',
  'jwt-openid-provider',
  'cluster',
  'gcra-leases-replicas',
  'reported-cost',
  'user-policies',
  'backend',
  'interop-nginx',
  'plan-services',
  'admin-listener',
].map((name) => `/test/integration/${name}.test.ts`);

const rank = (file: TestSpecification) => {
  const at = LONGEST.findIndex((end) => file.moduleId.endsWith(end));
  return at === -1 ? LONGEST.length : at;
};

export class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    // Array.prototype.sort is stable: the unlisted files keep the order vitest gave them.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}
