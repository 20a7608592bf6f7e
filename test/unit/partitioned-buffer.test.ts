import { describe, expect, it } from 'vitest';
import type { ClaimedJob } from '../../src/job/job.js';
import type { Store } from '../../src/store/store.js';
import { LeaseRenewer } from '../../src/worker/lease-renewer.js';
import { PartitionedBuffer } from '../../src/worker/partitioned-buffer.js';
import type { BufferedJob } from '../../src/worker/prefetch-buffer.js';

/** Holds the buffered jobs' leases, as the worker's renewer does (never started: no heartbeats). */
const renewer = new LeaseRenewer({} as Store, 30_000, 10_000, { onLost: () => {}, onError: () => {} });

function buffered(id: string, priority = 0): BufferedJob {
  const job = { id, token: 1, leaseOwner: 'w/1', priority, runAt: new Date(0) } as unknown as ClaimedJob;
  return { job, lease: renewer.add(job, 0) };
}

function drain(buffer: PartitionedBuffer): string[] {
  const order: string[] = [];
  for (let next = buffer.next(); next; next = buffer.next()) order.push(`${next.part}:${next.entry.job.id}`);
  return order;
}

describe('PartitionedBuffer', () => {
  it('starts the partitions in turn, each in its own claim order', () => {
    const buffer = new PartitionedBuffer(3);
    buffer.addBatch(0, [buffered('1'), buffered('2'), buffered('3')]);
    buffer.addBatch(2, [buffered('200000000000001')]);
    expect(buffer.size).toBe(4);
    expect(buffer.sizeOf(0)).toBe(3);
    expect(drain(buffer)).toEqual(['0:1', '2:200000000000001', '0:2', '0:3']);
  });

  it("never lets one partition's higher priorities keep another's jobs waiting", () => {
    const buffer = new PartitionedBuffer(2);
    buffer.addBatch(1, [buffered('100000000000001', 9)]);
    buffer.addBatch(0, [buffered('1', 0), buffered('2', 0)]);
    const first = buffer.next();
    const second = buffer.next();
    // Whichever partition's turn it is, the low-priority job of partition 1 starts within one round.
    expect([first?.part, second?.part].sort()).toEqual([0, 1]);
  });

  it('keeps claim order within a partition and finds a job by its held lease, not by an equal one', () => {
    const buffer = new PartitionedBuffer(2);
    const five = buffered('5', 3);
    buffer.addBatch(0, [five]);
    buffer.addBatch(0, [buffered('6', 1)]);
    expect(buffer.take(buffered('100000000000009').lease)).toBeUndefined();
    // The same job claimed again (same id and token here) is another lease: not this buffered one.
    expect(buffer.take(buffered('5', 3).lease)).toBeUndefined();
    expect(buffer.take({ id: '5', token: 1, leaseOwner: 'w/1' })).toBeUndefined();
    expect(buffer.take(five.lease)?.job.id).toBe('5');
    expect(buffer.takeAll().map((entry) => entry.job.id)).toEqual(['6']);
    expect(buffer.size).toBe(0);
    expect(buffer.next()).toBeUndefined();
  });
});
