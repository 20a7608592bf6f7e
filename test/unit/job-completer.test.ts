/**
 * JobCompleter, the batcher behind every completion a worker writes: what goes into each round
 * trip, when, and what happens to a completion whose round trip fails or whose lease is lost.
 * Time is a ManualClock; the store is a stub whose round trips the test answers one by one.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import type { CompleteOutcome, JobLease, Store } from '../../src/store/store.js';
import { type CompletionResult, JobCompleter } from '../../src/worker/job-completer.js';

/** Lets promise callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A store whose `jobCompleteMany` calls wait until the test answers or fails them. */
function answeredStore() {
  const calls: {
    ids: string[];
    answer: (outcomes?: CompleteOutcome[]) => void;
    fail: (error: Error) => void;
  }[] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const store = {
    jobCompleteMany: ({ leases }: { leases: readonly JobLease[] }) =>
      new Promise<CompleteOutcome[]>((resolve, reject) => {
        inFlight += 1;
        mostInFlight = Math.max(mostInFlight, inFlight);
        calls.push({
          ids: leases.map((lease) => lease.id),
          answer: (outcomes) => {
            inFlight -= 1;
            resolve(outcomes ?? leases.map(() => 'done'));
          },
          fail: (error) => {
            inFlight -= 1;
            reject(error);
          },
        });
      }),
  } as unknown as Pick<Store, 'jobCompleteMany'>;
  return { store, calls, mostInFlight: () => mostInFlight };
}

function completer(
  store: Pick<Store, 'jobCompleteMany'>,
  clock: ManualClock,
  overrides: {
    batchSize?: number;
    isHeld?: (lease: JobLease) => boolean;
    giveUpAfterMs?: number;
    onGiveUp?: (lease: JobLease) => void;
  } = {},
) {
  const errors: unknown[] = [];
  const batcher = new JobCompleter(store, {
    batchSize: overrides.batchSize ?? 500,
    flushMs: 1,
    isHeld: overrides.isHeld ?? (() => true),
    giveUpAfterMs: overrides.giveUpAfterMs,
    onGiveUp: overrides.onGiveUp,
    onError: (error) => errors.push(error),
    random: () => 0.5,
    clock,
  });
  return { batcher, errors };
}

const lease = (id: number): JobLease => ({ id: String(id), token: 1 });

/** Queues a completion and resolves with what its callback is told. */
function completion(batcher: JobCompleter, queued: JobLease): Promise<CompletionResult> {
  return new Promise((resolve) => batcher.complete(queued, resolve, (tell, result) => tell(result)));
}

describe('JobCompleter', () => {
  it('keeps one round trip in flight and sends what finished meanwhile as the next batch', async () => {
    const clock = new ManualClock(0);
    const { store, calls, mostInFlight } = answeredStore();
    const { batcher } = completer(store, clock);
    const results: Promise<CompletionResult>[] = [1, 2].map((id) => completion(batcher, lease(id)));
    expect(calls).toHaveLength(0); // waits flushMs for company
    clock.advance(1);
    expect(calls.map((call) => call.ids)).toEqual([['1', '2']]);

    // Finished while the first round trip is out: they wait for it, however long it takes.
    for (let id = 3; id <= 7; id += 1) results.push(completion(batcher, lease(id)));
    clock.advance(50);
    await settle();
    expect(calls).toHaveLength(1);

    calls[0]!.answer();
    await settle();
    clock.advance(1);
    expect(calls.map((call) => call.ids)).toEqual([
      ['1', '2'],
      ['3', '4', '5', '6', '7'],
    ]);
    calls[1]!.answer(['done', 'stale', 'done', 'done', 'done']);
    expect(await Promise.all(results)).toEqual(['done', 'done', 'done', 'stale', 'done', 'done', 'done']);
    expect(mostInFlight()).toBe(1);
  });

  it('splits what is pending into batches of at most batchSize, still one round trip at a time', async () => {
    const clock = new ManualClock(0);
    const { store, calls, mostInFlight } = answeredStore();
    const { batcher } = completer(store, clock, { batchSize: 3 });
    const results = [1, 2, 3, 4, 5, 6, 7].map((id) => completion(batcher, lease(id)));
    // A full batch goes at once, without waiting flushMs.
    expect(calls.map((call) => call.ids)).toEqual([['1', '2', '3']]);
    calls[0]!.answer();
    await settle();
    expect(calls.map((call) => call.ids)).toEqual([
      ['1', '2', '3'],
      ['4', '5', '6'],
    ]);
    calls[1]!.answer();
    await settle();
    clock.advance(1);
    expect(calls[2]!.ids).toEqual(['7']);
    calls[2]!.answer();
    expect(await Promise.all(results)).toEqual(Array(7).fill('done'));
    expect(mostInFlight()).toBe(1);
  });

  it('retries a failed round trip after a backoff, and abandons a completion whose lease was lost meanwhile', async () => {
    const clock = new ManualClock(0);
    const { store, calls } = answeredStore();
    const lost = new Set<string>();
    const { batcher, errors } = completer(store, clock, { isHeld: (held) => !lost.has(held.id) });
    const results = [1, 2].map((id) => completion(batcher, lease(id)));
    clock.advance(1);
    calls[0]!.fail(new Error('connection terminated'));
    await settle();
    expect(errors).toHaveLength(1);
    lost.add('2');
    clock.advance(40); // the first retry waits 50-100 ms
    expect(calls).toHaveLength(1);
    clock.advance(60);
    expect(calls.map((call) => call.ids)).toEqual([['1', '2'], ['1']]);
    calls[1]!.answer();
    expect(await Promise.all(results)).toEqual(['done', 'abandoned']);
  });

  it('gives a write up once its round trips have failed for giveUpAfterMs, though its lease is still held', async () => {
    // A write the database keeps refusing (not a lost connection: that costs the lease sooner)
    // must not hold its job, heartbeated under a renewed lease, for ever: as a single fenced
    // write does, it is abandoned after the window and its lease then lapses.
    const clock = new ManualClock(0);
    const sent: string[][] = [];
    let refusing = true;
    const store = {
      jobCompleteMany: async ({ leases }: { leases: readonly JobLease[] }) => {
        sent.push(leases.map((queued) => queued.id));
        if (refusing) throw new Error('value out of range');
        return leases.map((): CompleteOutcome => 'done');
      },
    } as unknown as Pick<Store, 'jobCompleteMany'>;
    const givenUp: string[] = [];
    const { batcher } = completer(store, clock, { giveUpAfterMs: 10_000, onGiveUp: (gone) => givenUp.push(gone.id) });
    const results = new Map<string, CompletionResult>();
    const track = (id: number) => completion(batcher, lease(id)).then((result) => results.set(String(id), result));
    const advanceTo = async (ms: number) => {
      while (clock.monotonic() < ms) {
        clock.advance(50);
        await settle();
      }
    };
    void track(1);
    await advanceTo(5_000);
    void track(2); // queued later: its own window starts at its own first failed round trip
    await advanceTo(9_900);
    expect(givenUp).toEqual([]);
    expect(sent.length).toBeGreaterThan(3); // retried with backoff meanwhile
    await advanceTo(14_000);
    expect(givenUp).toEqual(['1']);
    expect(results.get('1')).toBe('abandoned');
    expect(results.has('2')).toBe(false);
    refusing = false;
    await advanceTo(17_000);
    expect(results.get('2')).toBe('done');
    expect(sent.at(-1)).toEqual(['2']);
  });

  it('reports a callback that throws and still tells the rest of its batch', async () => {
    const clock = new ManualClock(0);
    const { store, calls } = answeredStore();
    const { batcher, errors } = completer(store, clock);
    const told: string[] = [];
    const tell = (id: string, result: CompletionResult) => {
      if (id === '1') throw new Error('bookkeeping bug');
      told.push(`${id}:${result}`);
    };
    batcher.complete(lease(1), '1', tell);
    batcher.complete(lease(2), '2', tell);
    clock.advance(1);
    calls[0]!.answer();
    await settle();
    expect(told).toEqual(['2:done']);
    expect(errors).toEqual([new Error('bookkeeping bug')]);
  });
});
