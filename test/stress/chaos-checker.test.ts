/**
 * The chaos checker must be able to fail: fed a history with a lost job, an early claim, two
 * accepted completions and an overlapping lease, it reports each one.
 */
import { describe, expect, it } from 'vitest';
import type { Job } from '../../src/job/job.js';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { type ChaosHistory, checkChaosRun } from './chaos-checker.js';

function row(id: string, fields: Partial<Job>): Job {
  return {
    id,
    kind: 'chaos.ok',
    queue: 'default',
    payload: null,
    priority: 0,
    state: 'done',
    runAt: new Date(1000),
    leaseUntil: null,
    leaseOwner: null,
    token: 1,
    attempts: 1,
    maxAttempts: 20,
    retryPolicy: DEFAULT_RETRY_POLICY,
    errors: [],
    idempotencyKey: `k${id}`,
    timeoutMs: null,
    scheduleId: null,
    scheduleSlot: null,
    createdAt: new Date(0),
    finishedAt: new Date(5000),
    ...fields,
  };
}

const base: ChaosHistory = {
  leaseMs: 2000,
  pollIntervalMs: 500,
  recoverySlackMs: 1000,
  submitted: [],
  faults: [],
  workerCuts: [],
  ambiguousSubmits: [],
  ledger: [],
  jobs: [],
};

describe('checkChaosRun', () => {
  it('passes a clean history and counts a twice-run effect as allowed', () => {
    const verdict = checkChaosRun({
      ...base,
      submitted: [{ id: '1', key: 'k1', kind: 'chaos.ok', maxAttempts: 20 }],
      ledger: [
        { e: 'start', w: 'a', pid: 1, j: '1', a: 1, t: 1, c: 1000, r: 1000, s: 1000 },
        { e: 'effect', w: 'a', pid: 1, j: '1', t: 1 },
        { e: 'start', w: 'b', pid: 2, j: '1', a: 2, t: 2, c: 3500, r: 1000, s: 3500 },
        { e: 'effect', w: 'b', pid: 2, j: '1', t: 2 },
        { e: 'completed', w: 'b', pid: 2, j: '1', t: 2 },
        { e: 'stale', w: 'a', pid: 1, j: '1', t: 1, op: 'complete' },
      ],
      jobs: [row('1', { token: 2, attempts: 2 })],
    });
    expect(verdict.violations).toEqual([]);
    expect(verdict.figures).toMatchObject({ effectsRanTwice: 1, staleResultsRefused: 1, jobsLost: 0 });
  });

  it('reports a lost job, an early claim, two accepted completions and an overlapping lease', () => {
    const verdict = checkChaosRun({
      ...base,
      submitted: [
        { id: '1', key: 'k1', kind: 'chaos.ok', maxAttempts: 20 },
        { id: '2', key: 'k2', kind: 'chaos.ok', maxAttempts: 20 },
      ],
      ledger: [
        { e: 'start', w: 'a', pid: 1, j: '1', a: 1, t: 1, c: 900, r: 1000, s: 900 },
        { e: 'effect', w: 'a', pid: 1, j: '1', t: 1 },
        { e: 'completed', w: 'a', pid: 1, j: '1', t: 1 },
        { e: 'start', w: 'b', pid: 2, j: '1', a: 2, t: 2, c: 1500, r: 1000, s: 1500 },
        { e: 'effect', w: 'b', pid: 2, j: '1', t: 2 },
        { e: 'completed', w: 'b', pid: 2, j: '1', t: 2 },
      ],
      jobs: [row('1', { token: 2, attempts: 2 }), row('2', { state: 'running', leaseUntil: new Date(9000) })],
    });
    const text = verdict.violations.join('\n');
    expect(text).toMatch(/I1 job 2/);
    expect(text).toMatch(/I4 job 1 token 1/);
    expect(text).toMatch(/I2 job 1: 2 completions/);
    expect(text).toMatch(/I3 job 1/);
    expect(verdict.figures).toMatchObject({ jobsLost: 1, jobsStartedEarly: 1, overlappingLeases: 1 });
  });
});
