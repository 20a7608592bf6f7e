/**
 * The dashboard reads both stores' plan tests make before planning what was sent (SQLite:
 * decision 0017, PostgreSQL: decision 0018): the same list pages and bulk actions on either, so
 * the two stores' index choices are checked against one workload. The tables behind them hold
 * 200,000 done and 100,000 pending jobs over queues q0-q2 and kinds k0-k4, a thousand cancelled and
 * fifty running.
 */
import type { JobState } from '../../src/job/job.js';
import { type CheckedListPage, checkListParams } from '../../src/store/dashboard-params.js';
import type { JobBulkApplyParams } from '../../src/store/store.js';

/** Each state alone, running with pending (two indexes on both stores), and the finished ones with dead. */
const STATE_SETS: readonly (readonly JobState[])[] = [
  ['pending'],
  ['running'],
  ['done'],
  ['cancelled'],
  ['pending', 'running'],
  ['done', 'cancelled', 'dead'],
];

/**
 * Every list read: each state set with and without a queue, in both orders, as a first page
 * (which must find rows) and as a later page of one kind.
 */
export function planListReads(): { label: string; first: CheckedListPage; later: CheckedListPage }[] {
  const reads: { label: string; first: CheckedListPage; later: CheckedListPage }[] = [];
  for (const queue of [undefined, 'q1']) {
    for (const states of STATE_SETS) {
      for (const order of ['asc', 'desc'] as const) {
        reads.push({
          label: `${states} ${queue} ${order}`,
          first: checkListParams({ states: [...states], queue, limit: 50, order }),
          later: checkListParams({ states: [...states], queue, kind: 'k1', limit: 50, order, afterId: '150000' }),
        });
      }
    }
  }
  return reads;
}

/**
 * Every bulk action read: cancel (pending and running) and reschedule (pending), with and without
 * a queue, one batch of 100 after id 100 (every such batch is full).
 */
export function planBulkReads(): JobBulkApplyParams[] {
  const reads: JobBulkApplyParams[] = [];
  for (const queue of [undefined, 'q1']) {
    reads.push({ action: 'cancel', filter: { queue, states: ['pending', 'running'] }, limit: 100, afterId: '100' });
    reads.push({
      action: 'reschedule',
      filter: { queue, states: ['pending'] },
      limit: 100,
      afterId: '100',
      runAt: new Date(1),
    });
  }
  return reads;
}
