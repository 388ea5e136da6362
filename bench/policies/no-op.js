// The benchmark's no-op policy (bench/policy-target.ts): a hook in every phase, each doing
// nothing, so `tollgate-policies` beside `tollgate` is what the policy interface itself costs.
import { definePolicy } from '../../dist/index.js';

export default definePolicy({
  name: 'bench-no-op',
  access: () => undefined,
  beforeForward: () => undefined,
  responseHead: () => undefined,
  afterAnswer: () => undefined,
});
