/**
 * Records how a store's failed attempts are written: the size of each `jobFailMany` batch and how
 * many single `jobFail` calls were made, the calls passing through to the real store (decision 0024).
 */
import type { Store } from '../../../src/store/store.js';

export interface FailureWrites {
  /** Each `jobFailMany` call's number of failures, in call order. */
  readonly batchSizes: number[];
  /** How many single `jobFail` calls were made. */
  singles(): number;
}

export function recordFailureWrites(store: Store): FailureWrites {
  const batchSizes: number[] = [];
  let singles = 0;
  const failMany = store.jobFailMany.bind(store);
  const fail = store.jobFail.bind(store);
  store.jobFailMany = async (params) => {
    batchSizes.push(params.failures.length);
    return failMany(params);
  };
  store.jobFail = async (params) => {
    singles += 1;
    return fail(params);
  };
  return { batchSizes, singles: () => singles };
}
