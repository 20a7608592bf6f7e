/**
 * JobExecution: one state per claimed job, every transition through one table. Time is a
 * ManualClock, so timeouts and durations are exact and nothing sleeps.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import { DocketError } from '../../src/job/errors.js';
import type { ClaimedJob } from '../../src/job/job.js';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { JobExecution } from '../../src/worker/job-execution.js';
import { JobAbortError } from '../../src/worker/job-handler.js';

function claimedJob(overrides: Partial<ClaimedJob> = {}): ClaimedJob {
  const at = new Date('2026-01-01T00:00:00Z');
  return {
    id: '42',
    kind: 'email',
    queue: 'default',
    payload: {},
    priority: 0,
    state: 'running',
    runAt: at,
    leaseUntil: new Date(at.getTime() + 30_000),
    leaseOwner: 'w/abcd.1',
    token: 7,
    attempts: 1,
    maxAttempts: 3,
    retryPolicy: DEFAULT_RETRY_POLICY,
    errors: [],
    idempotencyKey: null,
    timeoutMs: null,
    scheduleId: null,
    scheduleSlot: null,
    createdAt: at,
    finishedAt: null,
    ...overrides,
  };
}

/** An execution on a manual clock, with a log of the hooks it called. */
function setUp(overrides: Partial<ClaimedJob> = {}) {
  const clock = new ManualClock(1_000_000);
  const calls: string[] = [];
  const job = claimedJob(overrides);
  const lease = { id: job.id, token: job.token };
  const execution: JobExecution = new JobExecution(job, lease, clock, {
    onSlotFreed: () => calls.push(`slotFreed:${execution.state}`),
    onFinished: () => calls.push('finished'),
    onHandlerSettled: (_execution, outcome) => calls.push(`handlerSettled:${outcome.kind}`),
    onHandlerSettledLate: () => calls.push('handlerSettledLate'),
  });
  return { clock, calls, execution, lease };
}

describe('JobExecution', () => {
  it('starts running, holding a slot, under its lease', () => {
    const { execution, calls, lease } = setUp();
    expect(execution.state).toBe('running');
    expect(execution.handlerRunning).toBe(true);
    expect(execution.lease).toBe(lease);
    expect(execution.abortReason).toBeNull();
    expect(calls).toEqual([]);
  });

  it('returned: completing (slot freed once), then finished', () => {
    const { execution, calls } = setUp();
    expect(execution.settle({ kind: 'returned' })).toBe('complete');
    expect(execution.state).toBe('completing');
    expect(calls).toEqual(['slotFreed:completing']);
    execution.finish();
    expect(execution.state).toBe('finished');
    expect(calls).toEqual(['slotFreed:completing', 'finished']);
  });

  it('threw: failing, then finished', () => {
    const { execution, calls } = setUp();
    expect(execution.settle({ kind: 'threw', message: 'boom', detail: undefined, hints: {} })).toBe('fail');
    expect(execution.state).toBe('failing');
    execution.finish();
    expect(calls).toEqual(['slotFreed:failing', 'finished']);
  });

  it('measures how long it ran on the injected clock', () => {
    const { execution, clock } = setUp();
    clock.advance(1234);
    expect(execution.elapsedMs()).toBe(1234);
  });

  it('fires the timeout exactly at timeoutMs, never before, and cuts the handler off into failing', () => {
    const { execution, clock, calls } = setUp({ timeoutMs: 500 });
    const timeouts: number[] = [];
    execution.armTimeout(() => {
      timeouts.push(execution.elapsedMs());
      execution.cutOff('timeout');
    });
    clock.advance(499);
    expect(timeouts).toEqual([]);
    expect(execution.state).toBe('running');
    clock.advance(1);
    expect(timeouts).toEqual([500]);
    expect(execution.state).toBe('failing');
    expect(execution.abortReason).toBe('timeout');
    expect(calls).toEqual(['slotFreed:failing']);
    const reason = execution.abort.signal.reason as JobAbortError;
    expect(reason).toBeInstanceOf(JobAbortError);
    expect(reason).toBeInstanceOf(DocketError);
    expect(reason).toMatchObject({ reason: 'timeout', code: 'job_aborted', name: 'JobAbortError' });
    expect(reason.message).toBe("the job's timeout of 500 ms passed");
  });

  it('clears its timeout when the handler settles first', () => {
    const { execution, clock } = setUp({ timeoutMs: 500 });
    let fired = false;
    execution.armTimeout(() => {
      fired = true;
    });
    expect(clock.pendingTimers).toBe(1);
    clock.advance(100);
    execution.settle({ kind: 'returned' });
    expect(clock.pendingTimers).toBe(0);
    clock.advance(10_000);
    expect(fired).toBe(false);
  });

  it('arms no timer for a job without a timeout', () => {
    const { execution, clock } = setUp({ timeoutMs: null });
    execution.armTimeout(() => {});
    expect(clock.pendingTimers).toBe(0);
  });

  it('a lost lease finishes at once and writes nothing; the late outcome is ignored', () => {
    const { execution, calls } = setUp();
    expect(execution.cutOff('lease_lost')).toBe(true);
    expect(execution.state).toBe('finished');
    expect(execution.abort.aborted).toBe(true);
    expect(calls).toEqual(['slotFreed:finished', 'finished']);
    expect(execution.settle({ kind: 'aborted' })).toBe('none');
    expect(execution.settle({ kind: 'returned' })).toBe('none');
    expect(calls).toEqual(['slotFreed:finished', 'finished']);
  });

  it('a shutdown cut-off releases; a second cut-off does nothing', () => {
    const { execution, calls } = setUp();
    expect(execution.cutOff('shutdown')).toBe(true);
    expect(execution.state).toBe('releasing');
    expect(execution.cutOff('lease_lost')).toBe(false);
    expect(execution.abortReason).toBe('shutdown');
    execution.finish();
    expect(calls).toEqual(['slotFreed:releasing', 'finished']);
  });

  it('cannot be cut off once its handler has settled', () => {
    const { execution } = setUp();
    execution.settle({ kind: 'returned' });
    expect(execution.cutOff('timeout')).toBe(false);
    expect(execution.abort.aborted).toBe(false);
  });

  it('handed over to the handler transaction: no timeout, a return counts without a write', () => {
    const { execution, clock, calls } = setUp({ timeoutMs: 500 });
    let fired = false;
    execution.armTimeout(() => {
      fired = true;
    });
    expect(execution.transactionRefusal()).toBeNull();
    execution.handOver();
    expect(execution.state).toBe('handed_over');
    expect(execution.completedInTransaction).toBe(true);
    expect(execution.handlerRunning).toBe(true);
    clock.advance(1000);
    expect(fired).toBe(false);
    expect(execution.settle({ kind: 'returned' })).toBe('completed_in_transaction');
    expect(execution.state).toBe('finished');
    expect(calls).toEqual(['slotFreed:finished', 'finished']);
  });

  it('handed over, then threw: the failure is still recorded under the lease', () => {
    const { execution } = setUp();
    execution.handOver();
    expect(execution.settle({ kind: 'threw', message: 'after commit?', detail: undefined, hints: {} })).toBe('fail');
    expect(execution.state).toBe('failing');
    expect(execution.completedInTransaction).toBe(true);
  });

  it('refuses an in-transaction completion after a cut-off or once the handler settled', () => {
    const cut = setUp();
    cut.execution.cutOff('shutdown');
    expect(cut.execution.transactionRefusal()).toBe('this attempt was cut off (shutdown)');
    const settled = setUp();
    settled.execution.settle({ kind: 'returned' });
    expect(settled.execution.transactionRefusal()).toBe('its handler already settled');
  });

  it('a job with no handler goes straight to failing', () => {
    const { execution, calls } = setUp();
    execution.failWithoutHandler();
    expect(execution.state).toBe('failing');
    expect(calls).toEqual(['slotFreed:failing']);
  });

  it('throws on an impossible transition instead of writing a second outcome', () => {
    const { execution, calls } = setUp();
    execution.settle({ kind: 'returned' });
    execution.finish();
    expect(() => execution.finish()).toThrow('job 42 (token 7): no transition from finished to finished');
    expect(() => execution.failWithoutHandler()).toThrow('no transition from finished to failing');
    expect(calls).toEqual(['slotFreed:completing', 'finished']);
  });
});

describe('ManualClock', () => {
  it('fires timers in due order (ties in creation order), each at its own instant', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push(`b@${clock.now()}`), 20);
    clock.setTimeout(() => fired.push(`a@${clock.now()}`), 10);
    clock.setTimeout(() => fired.push(`c@${clock.now()}`), 20);
    const cleared = clock.setTimeout(() => fired.push('never'), 15);
    clock.clearTimeout(cleared);
    clock.advance(25);
    expect(fired).toEqual(['a@10', 'b@20', 'c@20']);
    expect(clock.now()).toBe(25);
    expect(clock.monotonic()).toBe(25);
  });

  it('fires a timer set by a firing timer when it falls inside the same advance', () => {
    const clock = new ManualClock(0);
    const fired: number[] = [];
    clock.setTimeout(() => {
      fired.push(clock.now());
      clock.setTimeout(() => fired.push(clock.now()), 5);
    }, 5);
    clock.advance(12);
    expect(fired).toEqual([5, 10]);
  });

  it('refuses to move backwards with advance', () => {
    expect(() => new ManualClock().advance(-1)).toThrow(RangeError);
  });
});
