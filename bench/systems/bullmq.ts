/**
 * BullMQ 6 driver, on the local Redis. It touches only keys under its own prefix, so a shared Redis
 * keeps everything else. Default: a Worker at the shared concurrency with the library's defaults
 * (completed jobs kept). Tuned: the production advice of its docs: completed jobs removed at once
 * (`removeOnComplete: { count: 0 }`) and a higher concurrency (4× the shared one), since its fetch
 * is one job per Redis round trip and more in flight hides that latency.
 */
import * as bullmq from 'bullmq';
import * as ioredis from 'ioredis';
import {
  type BenchJob,
  benchIndexOf,
  benchKindName,
  NEIGHBOUR_QUEUE,
  type SystemConfig,
  type SystemModule,
  type SystemName,
} from './system.js';

const QUEUE = 'bench';

/** What the driver uses of BullMQ and ioredis, so another release of them can be passed in. */
export interface BullmqLibrary {
  Queue: typeof bullmq.Queue;
  Worker: typeof bullmq.Worker;
  Redis: typeof ioredis.Redis;
}

/** BullMQ behind the bench interface, for one release of the library. */
export function makeBullmqSystem(lib: BullmqLibrary, name: SystemName): SystemModule {
  const { Queue, Worker, Redis } = lib;

  function connection(config: SystemConfig): InstanceType<typeof Redis> {
    // maxRetriesPerRequest null: BullMQ workers require it for their blocking commands.
    return new Redis(config.redisUrl, { maxRetriesPerRequest: null });
  }

  async function deletePrefix(config: SystemConfig): Promise<number> {
    if (!/^[a-z0-9-]+$/.test(config.redisPrefix) || config.redisPrefix.length < 6) {
      throw new Error(`refusing to delete Redis keys under prefix ${JSON.stringify(config.redisPrefix)}`);
    }
    const redis = connection(config);
    let deleted = 0;
    try {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${config.redisPrefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) deleted += await redis.del(...keys);
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
    return deleted;
  }

  return {
    name,
    variants: ['default', 'tuned'],

    describe(variant, concurrency) {
      return variant === 'default'
        ? `new Worker('${QUEUE}', handler, { concurrency: ${concurrency} }); everything else default (completed jobs kept)`
        : `new Worker('${QUEUE}', handler, { concurrency: ${tunedConcurrency(concurrency)}, removeOnComplete: { count: 0 }, removeOnFail: { count: 0 } })`;
    },

    async reset(config) {
      await deletePrefix(config);
    },

    async openStore(config) {
      const redis = connection(config);
      const queue = new Queue(QUEUE, { connection: redis, prefix: config.redisPrefix });
      return {
        async insert(jobs: readonly BenchJob[]) {
          const now = Date.now();
          await queue.addBulk(
            jobs.map((job) => ({
              // The kinds workload: BullMQ's kind is the job's name; one Worker takes every name.
              name: benchKindName('noop', job.kind ?? 0),
              data: { i: job.i },
              opts: job.runAt ? { delay: Math.max(0, job.runAt.getTime() - now) } : {},
            })),
          );
        },
        async submitOne(i: number, key?: string) {
          // A given jobId is BullMQ's deduplication: an add whose id exists returns that job.
          await queue.add('noop', { i }, key === undefined ? undefined : { jobId: key });
        },
        async submitOneAt(i: number, runAtMs: number) {
          // BullMQ takes a delay, which it adds to its own Date.now() when the add is made.
          await queue.add('noop', { i }, { delay: Math.max(0, runAtMs - Date.now()) });
        },
        async remainingDue() {
          const counts = await queue.getJobCounts('waiting', 'active', 'prioritized', 'waiting-children');
          return Object.values(counts).reduce((sum, n) => sum + n, 0);
        },
        async close() {
          await queue.close();
          redis.disconnect();
        },
      };
    },

    async startWorker(config, onStart) {
      const redis = connection(config);
      const tuned = config.variant === 'tuned';
      const worker = new Worker(
        config.neighbour ? NEIGHBOUR_QUEUE : QUEUE,
        async (job) => {
          onStart(benchIndexOf(job.data));
        },
        {
          connection: redis,
          prefix: config.redisPrefix,
          concurrency: tuned ? tunedConcurrency(config.concurrency) : config.concurrency,
          ...(tuned ? { removeOnComplete: { count: 0 }, removeOnFail: { count: 0 } } : {}),
        },
      );
      worker.on('error', (error) => console.error('bullmq (worker):', error.message));
      await worker.waitUntilReady();
      return {
        async stop() {
          await worker.close();
          redis.disconnect();
        },
      };
    },

    async destroy(config) {
      await deletePrefix(config);
    },
  };
}

function tunedConcurrency(concurrency: number): number {
  return concurrency * 4;
}

/** BullMQ (the repository's release) behind the bench interface. */
export const bullmqSystem: SystemModule = makeBullmqSystem(
  { Queue: bullmq.Queue, Worker: bullmq.Worker, Redis: ioredis.Redis },
  'bullmq',
);
