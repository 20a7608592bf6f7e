/**
 * One handler invocation (invokeHandler) and the context it receives (WorkerJobContext): every way
 * a handler can end becomes exactly one outcome, a cut-off wins over a handler still running, and
 * a handler that settles after its cut-off is reported as discarded, once.
 */
import { describe, expect, it } from 'vitest';
import type { ClaimedJob } from '../../src/job/job.js';
import {
  type HandlerOutcome,
  InvocationAbort,
  invokeHandler,
  WorkerJobContext,
} from '../../src/worker/job-executor.js';
import type { JobContext, JobHandler } from '../../src/worker/job-handler.js';
import { JobAbortError } from '../../src/worker/job-handler.js';
import type { Logger } from '../../src/worker/logger.js';

const job = {
  id: '42',
  kind: 'mail.send',
  queue: 'default',
  attempts: 2,
  maxAttempts: 5,
  token: 7,
  runAt: new Date('2026-12-01T09:00:00Z'),
  payload: { to: 'a@example.com' },
  timeoutMs: null,
} as unknown as ClaimedJob;

const logged: { fields: unknown; message: string }[] = [];
const logger: Logger = {
  debug: () => {},
  info: (fields, message) => logged.push({ fields, message }),
  warn: () => {},
  error: () => {},
};

/**
 * Invokes `handler` with a listener that records what it is told: `outcome` resolves with the
 * first outcome, `outcomes()` is every one (there must be exactly one), `late()` counts late settles.
 */
function invoke(handler: (payload: unknown, ctx: JobContext) => unknown, abort = new InvocationAbort()) {
  const ctx = new WorkerJobContext(job, abort, logger, async () => {});
  const told: HandlerOutcome[] = [];
  let late = 0;
  let resolveOutcome: (outcome: HandlerOutcome) => void = () => {};
  const outcome = new Promise<HandlerOutcome>((resolve) => (resolveOutcome = resolve));
  let returnedFromInvoke = false;
  invokeHandler(handler as JobHandler<never>, job, ctx, abort, {
    handlerSettled(settled) {
      // Never told inside invokeHandler itself: the worker starts its next jobs there.
      expect(returnedFromInvoke).toBe(true);
      told.push(settled);
      resolveOutcome(settled);
    },
    handlerSettledLate() {
      late += 1;
    },
  });
  returnedFromInvoke = true;
  return { abort, ctx, outcome, outcomes: () => told, late: () => late };
}

/** Lets promise callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('invokeHandler', () => {
  it('turns every way a handler ends into one outcome', async () => {
    expect(await invoke(() => 'value').outcome).toEqual({ kind: 'returned' });
    expect(await invoke(async () => {}).outcome).toEqual({ kind: 'returned' });
    const syncThrow = await invoke(() => {
      throw new Error('bad input');
    }).outcome;
    expect(syncThrow).toMatchObject({ kind: 'threw', message: 'bad input' });
    const rejected = await invoke(async () => {
      throw Object.assign(new Error('rate limited'), { retryAfterMs: 5000 });
    }).outcome;
    expect(rejected).toMatchObject({ kind: 'threw', message: 'rate limited', hints: { retryAfterMs: 5000 } });
    // A handler may return any thenable (a library's own promise type), not only a native Promise.
    const rejectingThenable = {
      // biome-ignore lint/suspicious/noThenProperty: the point of the test is a non-native thenable
      then: (_ok: unknown, fail: (e: unknown) => void) => fail('nope'),
    };
    const thenable = await invoke(() => rejectingThenable).outcome;
    expect(thenable).toMatchObject({ kind: 'threw', message: 'nope' });
  });

  it('resolves aborted when cut off first, and reports the late settle once', async () => {
    let finish: () => void = () => {};
    const { abort, outcome, late } = invoke(() => new Promise<void>((resolve) => (finish = resolve)));
    abort.abort(new JobAbortError('timeout', 'too slow'));
    expect(await outcome).toEqual({ kind: 'aborted' });
    expect(late()).toBe(0);
    finish();
    await settle();
    expect(late()).toBe(1);
  });

  it('keeps the outcome of a handler that settled before a later cut-off', async () => {
    const { abort, outcome, late } = invoke(async () => {});
    expect(await outcome).toEqual({ kind: 'returned' });
    abort.abort(new JobAbortError('shutdown', 'stopping'));
    await settle();
    expect(late()).toBe(0);
  });

  it('resolves aborted, reporting nothing later, when the cut-off comes while the handler is being called', async () => {
    const abort = new InvocationAbort();
    const cutOffDuringCall = () => {
      abort.abort(new JobAbortError('lease_lost', 'lost'));
      return Promise.resolve();
    };
    const { outcome, outcomes, late } = invoke(cutOffDuringCall, abort);
    expect(await outcome).toEqual({ kind: 'aborted' });
    await settle();
    expect(late()).toBe(0);
    expect(outcomes()).toEqual([{ kind: 'aborted' }]);
  });

  it('tells one outcome per invocation, whatever comes after it', async () => {
    // A synchronous return is final: a cut-off right after it changes nothing.
    const sync = invoke(() => 'value');
    sync.abort.abort(new JobAbortError('shutdown', 'stopping'));
    await settle();
    expect(sync.outcomes()).toEqual([{ kind: 'returned' }]);
    expect(sync.late()).toBe(0);
    // A cut-off, then the handler's rejection: one aborted outcome, one late settle.
    let fail: (error: Error) => void = () => {};
    const cut = invoke(() => new Promise<void>((_resolve, reject) => (fail = reject)));
    cut.abort.abort(new JobAbortError('timeout', 'too slow'));
    cut.abort.abort(new JobAbortError('shutdown', 'stopping'));
    fail(new Error('late failure'));
    await settle();
    expect(cut.outcomes()).toEqual([{ kind: 'aborted' }]);
    expect(cut.late()).toBe(1);
  });
});

describe('WorkerJobContext', () => {
  it('carries the attempt, makes its signal and logger on first use, and works destructured', async () => {
    const abort = new InvocationAbort();
    const ctx = new WorkerJobContext(job, abort, logger, async () => {});
    expect(ctx).toMatchObject({
      jobId: '42',
      kind: 'mail.send',
      queue: 'default',
      attempt: 2,
      maxAttempts: 5,
      token: 7,
    });
    expect(ctx.runAt.toISOString()).toBe('2026-12-01T09:00:00.000Z');
    const { signal, logger: jobLogger } = ctx;
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(ctx.signal).toBe(signal);
    expect(ctx.logger).toBe(jobLogger);
    jobLogger.info({ step: 1 }, 'sending');
    expect(logged.at(-1)).toEqual({
      fields: { jobId: '42', kind: 'mail.send', attempt: 2, step: 1 },
      message: 'sending',
    });
    abort.abort(new JobAbortError('timeout', 'too slow'));
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(JobAbortError);
  });

  it('spreads into its data fields only, with no internals', () => {
    const ctx = new WorkerJobContext(job, new InvocationAbort(), logger, async () => {});
    expect(Object.keys({ ...ctx }).sort()).toEqual(
      ['attempt', 'completeInTransaction', 'jobId', 'kind', 'maxAttempts', 'queue', 'runAt', 'token'].sort(),
    );
  });
});
