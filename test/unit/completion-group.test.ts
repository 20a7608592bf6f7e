/**
 * CompletionGroup's policy (src/http/completion-group.ts), against a store whose round trips the
 * test ends by hand: alone when idle, gathered while a round trip is in flight, a lease named twice
 * written once with both answered, a failed round trip failing its own group only.
 */
import { describe, expect, it } from 'vitest';
import { CompletionGroup } from '../../src/http/completion-group.js';
import type { CompleteOutcome, JobCompleteManyParams } from '../../src/store/store.js';

/** A store whose jobCompleteMany calls wait until the test answers or fails them. */
function heldStore() {
  const calls: {
    params: JobCompleteManyParams;
    answer: (outcomes: CompleteOutcome[]) => void;
    fail: (e: Error) => void;
  }[] = [];
  const store = {
    jobCompleteMany: (params: JobCompleteManyParams) =>
      new Promise<CompleteOutcome[]>((answer, fail) => {
        calls.push({ params, answer, fail });
      }),
  };
  return { store, calls };
}

const lease = (id: string, token = 1) => ({ id, token, leaseOwner: `w/${id}` });
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('CompletionGroup', () => {
  it('writes a lone completion at once and gathers the ones that arrive while it is in flight', async () => {
    const { store, calls } = heldStore();
    const group = new CompletionGroup(store, false);
    const first = group.complete(lease('1'));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.params.leases).toEqual([lease('1')]);
    const later = ['2', '3', '4'].map((id) => group.complete(lease(id)));
    expect(calls).toHaveLength(1);
    calls[0]!.answer(['done']);
    expect(await first).toBe('done');
    await settled();
    expect(calls).toHaveLength(2);
    expect(calls[1]!.params.leases.map((l) => l.id)).toEqual(['2', '3', '4']);
    calls[1]!.answer(['done', 'stale', 'done']);
    expect(await Promise.all(later)).toEqual(['done', 'stale', 'done']);
  });

  it('writes a lease named twice once and answers both requests', async () => {
    const { store, calls } = heldStore();
    const group = new CompletionGroup(store, true);
    const blocker = group.complete(lease('0'));
    const twice = [group.complete(lease('5')), group.complete(lease('5')), group.complete(lease('5', 2))];
    calls[0]!.answer(['done']);
    await blocker;
    await settled();
    expect(calls[1]!.params).toEqual({ leases: [lease('5'), lease('5', 2)], deleteRecord: true });
    calls[1]!.answer(['done', 'stale']);
    expect(await Promise.all(twice)).toEqual(['done', 'done', 'stale']);
  });

  it('fails each request of a failed round trip with its error, and writes the next group', async () => {
    const { store, calls } = heldStore();
    const group = new CompletionGroup(store, false);
    const first = group.complete(lease('1'));
    const second = group.complete(lease('2'));
    const lost = new Error('connection lost');
    calls[0]!.fail(lost);
    await expect(first).rejects.toBe(lost);
    await settled();
    expect(calls).toHaveLength(2);
    calls[1]!.answer([]);
    // A lease the store's answer leaves out was not completed.
    expect(await second).toBe('stale');
    const third = group.complete(lease('3'));
    expect(calls).toHaveLength(3);
    calls[2]!.answer(['done']);
    expect(await third).toBe('done');
  });
});
