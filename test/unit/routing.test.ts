/**
 * Routing policy (src/routing/): which kinds a worker claims, which due jobs no live worker
 * serves, and what a remote worker's registration must look like. Pure functions, no store.
 */
import { describe, expect, it } from 'vitest';
import { BUILTIN_KINDS, WEBHOOK_KIND } from '../../src/job/builtin-kinds.js';
import { ConfigurationError, ValidationError } from '../../src/job/errors.js';
import {
  countsByQueue,
  isHandled,
  resolveClaimKinds,
  type ServingWorker,
  servesJob,
  unhandledCounts,
} from '../../src/routing/routing.js';
import {
  DEFAULT_REGISTRY_TTL_MS,
  normalizeRemoteRegistration,
  validateRegistryTtlMs,
} from '../../src/routing/worker-registration.js';
import { unhandledParkMessage, unhandledSweepIntervalMs } from '../../src/worker/unhandled-parker.js';
import { resolveWorkerOptions } from '../../src/worker/worker-options.js';

const worker = (fields: Partial<ServingWorker>): ServingWorker => ({
  queues: null,
  kinds: null,
  excludeKinds: [],
  ...fields,
});

describe('servesJob', () => {
  it('serves every queue and kind when queues and kinds are null', () => {
    expect(servesJob(worker({}), 'any', 'any.kind')).toBe(true);
  });

  it('serves only the listed queues', () => {
    const w = worker({ queues: ['billing'] });
    expect(servesJob(w, 'billing', 'x')).toBe(true);
    expect(servesJob(w, 'default', 'x')).toBe(false);
  });

  it('serves only the listed kinds', () => {
    const w = worker({ kinds: ['a', 'b'] });
    expect(servesJob(w, 'default', 'b')).toBe(true);
    expect(servesJob(w, 'default', 'c')).toBe(false);
  });

  it('never serves an excluded kind, even for a catch-all worker or a listed kind', () => {
    expect(servesJob(worker({ excludeKinds: ['x'] }), 'default', 'x')).toBe(false);
    expect(servesJob(worker({ kinds: ['x'], excludeKinds: ['x'] }), 'default', 'x')).toBe(false);
  });

  it('needs both the queue and the kind to match', () => {
    const w = worker({ queues: ['q1'], kinds: ['k1'] });
    expect(servesJob(w, 'q1', 'k1')).toBe(true);
    expect(servesJob(w, 'q2', 'k1')).toBe(false);
    expect(servesJob(w, 'q1', 'k2')).toBe(false);
  });
});

describe('isHandled and unhandledCounts', () => {
  const due = [
    { queue: 'default', kind: 'email.send', count: 3 },
    { queue: 'default', kind: 'report.build', count: 2 },
    { queue: 'reports', kind: 'report.build', count: 5 },
    { queue: 'reports', kind: 'zero', count: 0 },
  ];

  it('counts everything as unhandled when no worker is live', () => {
    expect(isHandled([], 'default', 'email.send')).toBe(false);
    expect(unhandledCounts(due, [])).toEqual(due.slice(0, 3));
  });

  it('leaves out what some live worker serves, and zero counts', () => {
    const workers = [worker({ kinds: ['email.send'] }), worker({ queues: ['reports'], kinds: ['report.build'] })];
    expect(unhandledCounts(due, workers)).toEqual([{ queue: 'default', kind: 'report.build', count: 2 }]);
  });

  it('counts nothing as unhandled while a catch-all worker serves every queue', () => {
    expect(unhandledCounts(due, [worker({})])).toEqual([]);
  });

  it('counts a kind a remote worker excludes as unhandled', () => {
    const remote = worker({ excludeKinds: [WEBHOOK_KIND] });
    const webhook = [{ queue: 'docket.builtin', kind: WEBHOOK_KIND, count: 1 }];
    expect(unhandledCounts(webhook, [remote])).toEqual(webhook);
  });

  it('sums counts by queue', () => {
    expect(countsByQueue(due)).toEqual(
      new Map([
        ['default', 5],
        ['reports', 5],
      ]),
    );
  });
});

describe('resolveClaimKinds', () => {
  it('claims every kind with a handler, sorted, by default', () => {
    expect(resolveClaimKinds({ handlerKinds: ['b', 'a'], kinds: undefined, catchAll: false, workerId: 'w' })).toEqual([
      'a',
      'b',
    ]);
  });

  it('claims the explicit subset', () => {
    expect(
      resolveClaimKinds({ handlerKinds: ['a', 'b', 'c'], kinds: ['c', 'a'], catchAll: false, workerId: 'w' }),
    ).toEqual(['a', 'c']);
  });

  it('has no kind filter for a catch-all worker, even with no handlers', () => {
    expect(resolveClaimKinds({ handlerKinds: [], kinds: undefined, catchAll: true, workerId: 'w' })).toBeNull();
  });

  it('refuses a worker with no handlers and no catchAll, naming the way out', () => {
    const attempt = () => resolveClaimKinds({ handlerKinds: [], kinds: undefined, catchAll: false, workerId: 'w-1' });
    expect(attempt).toThrow(ConfigurationError);
    expect(attempt).toThrow(/worker w-1 has no handlers.*catchAll: true/);
  });

  it('refuses an explicit kind with no handler, naming it and the registered ones', () => {
    const attempt = () =>
      resolveClaimKinds({ handlerKinds: ['a'], kinds: ['a', 'b.c'], catchAll: false, workerId: 'w' });
    expect(attempt).toThrow(ConfigurationError);
    expect(attempt).toThrow(/kinds names "b\.c" with no registered handler \(registered: "a"\)/);
  });
});

describe('worker options for routing and the registry', () => {
  it('defaults to handler kinds, no catchAll, a 30 s registry ttl refreshed every 5 s', () => {
    const options = resolveWorkerOptions({});
    expect(options.kinds).toBeUndefined();
    expect(options.catchAll).toBe(false);
    expect(options.registryTtlMs).toBe(DEFAULT_REGISTRY_TTL_MS);
    expect(options.registryTtlMs).toBe(30_000);
    expect(options.registryRefreshMs).toBe(5_000);
  });

  it('accepts kinds and a short registry ttl', () => {
    const options = resolveWorkerOptions({ kinds: ['a', 'b'], registryTtlMs: 1200 });
    expect(options.kinds).toEqual(['a', 'b']);
    expect(options.registryRefreshMs).toBe(200);
  });

  it.each([
    [{ catchAll: true, kinds: ['a'] }, /catchAll and kinds cannot be combined/],
    [{ kinds: [] }, /kinds must be a non-empty array/],
    [{ kinds: 'a' }, /kinds must be a non-empty array/],
    [{ kinds: ['a', ''] }, /kinds\[1\]: must be a non-empty string/],
    [{ kinds: ['a', 'a'] }, /kinds names "a" twice/],
    [{ catchAll: 'yes' }, /catchAll must be a boolean/],
    [{ registryTtlMs: 10 }, /registryTtlMs must be between 300/],
    [{ registryTtlMs: 1.5 }, /registryTtlMs must be an integer/],
  ])('refuses %j', (options, message) => {
    expect(() => resolveWorkerOptions(options as never)).toThrow(ConfigurationError);
    expect(() => resolveWorkerOptions(options as never)).toThrow(message);
  });
});

describe('normalizeRemoteRegistration', () => {
  it('fills in defaults, sorts and de-duplicates names and always excludes built-in kinds', () => {
    expect(normalizeRemoteRegistration({ id: 'remote-1', kinds: ['b', 'a', 'b'], excludeKinds: ['z'] })).toEqual({
      id: 'remote-1',
      host: '',
      pid: null,
      version: '',
      queues: null,
      kinds: ['a', 'b'],
      excludeKinds: [...BUILTIN_KINDS, 'z'].sort(),
      concurrency: 1,
      origin: 'remote',
    });
  });

  it.each([
    [{ id: '' }, 'id'],
    [{ id: 'x'.repeat(201) }, 'id'],
    [{ id: 'r', pid: -1 }, 'pid'],
    [{ id: 'r', concurrency: 0 }, 'concurrency'],
    [{ id: 'r', queues: ['bad queue'] }, 'queues[0]'],
    [{ id: 'r', kinds: [''] }, 'kinds[0]'],
    [{ id: 'r', host: 42 }, 'host'],
  ])('refuses %j naming field %s', (input, field) => {
    let thrown: unknown;
    try {
      normalizeRemoteRegistration(input as never);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect((thrown as ValidationError).field).toBe(field);
  });

  it('validates the ttl', () => {
    expect(validateRegistryTtlMs(undefined)).toBe(30_000);
    expect(validateRegistryTtlMs(1000)).toBe(1000);
    expect(() => validateRegistryTtlMs(5)).toThrow(/ttlMs: must be an integer from 300/);
  });
});

describe('the unhandledAfterMs sweep', () => {
  it('sweeps every quarter of unhandledAfterMs, within 100 ms and 30 s', () => {
    expect(unhandledSweepIntervalMs(2_000)).toBe(500);
    expect(unhandledSweepIntervalMs(10)).toBe(100);
    expect(unhandledSweepIntervalMs(3_600_000)).toBe(30_000);
  });

  it('states the reason, kind, queue and threshold in the parked job error', () => {
    expect(unhandledParkMessage('reports', 'report.build', 60_000)).toMatch(
      /^unhandled: no live worker had a handler for kind "report\.build" on queue "reports" for more than 60000 ms \(unhandledAfterMs\)/,
    );
  });
});
