/** Counting a store's calls in tests that must show a call was not made (or made so often). */
import type { Store } from '../../src/store/store.js';

/** Counts calls to one of a store's methods until `restore()` puts the original back. */
export function countCalls(store: Store, method: 'jobClaim' | 'jobGet') {
  const original = store[method];
  const counter = { count: 0, restore: () => Object.assign(store, { [method]: original }) };
  Object.assign(store, {
    [method]: (...args: unknown[]) => {
      counter.count += 1;
      return (original as (...args: unknown[]) => unknown).apply(store, args);
    },
  });
  return counter;
}
