/**
 * The operator commands as scripts use them: real `docket` processes against real stores, checking
 * stdout, stderr and the exit codes (0 ok, 1 failed or not found, 2 bad usage).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import type { Job } from '../../src/job/job.js';
import { createTestDatabase, type TestDatabase } from '../support/stores.js';
import { type CliResult, describeRun, runDocket } from './run-docket.js';

describe.each(['sqlite', 'postgres'] as const)('docket submit and jobs on %s', (kind) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('prints only the new id, and jobs show returns the job as JSON', async () => {
    const submitted = await runDocket([
      'submit',
      '--db',
      db.url,
      '--kind',
      'email.send',
      '--payload',
      '{"to":"a@example.com","n":1}',
      '--delay-ms',
      '60000',
      '--queue',
      'mail',
      '--priority',
      '-3',
      '--max-attempts',
      '7',
    ]);
    expect(submitted.code, describeRun(submitted)).toBe(0);
    const id = submitted.stdout.trim();
    expect(id).toMatch(/^\d+$/);

    const shown = await runDocket(['jobs', 'show', id, '--db', db.url, '--json']);
    expect(shown.code, describeRun(shown)).toBe(0);
    const job = JSON.parse(shown.stdout) as Job;
    expect(job).toMatchObject({
      id,
      kind: 'email.send',
      queue: 'mail',
      priority: -3,
      maxAttempts: 7,
      state: 'pending',
      payload: { to: 'a@example.com', n: 1 },
      attempts: 0,
      token: 0,
    });
    expect(Date.parse(String(job.runAt))).toBeGreaterThan(Date.now() + 30_000);
  });

  it('returns the first id for a repeated idempotency key, in JSON', async () => {
    const args = ['submit', '--db', db.url, '--kind', 'report.build', '--idempotency-key', 'nightly-1', '--json'];
    const first = await runDocket(args);
    const second = await runDocket(args);
    expect(first.code, describeRun(first)).toBe(0);
    expect(second.code, describeRun(second)).toBe(0);
    const a = JSON.parse(first.stdout) as { id: string; created: boolean };
    const b = JSON.parse(second.stdout) as { id: string; created: boolean };
    expect(a.created).toBe(true);
    expect(b).toMatchObject({ id: a.id, created: false });
  });
});

describe('docket admin commands on sqlite', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('lists jobs as an aligned table and as JSON, filtered by state and kind', async () => {
    const ids: string[] = [];
    for (const kind of ['list.a', 'list.b', 'list.a']) {
      const result = await runDocket(['submit', '--db', db.url, '--kind', kind, '--delay-ms', '60000']);
      expect(result.code, describeRun(result)).toBe(0);
      ids.push(result.stdout.trim());
    }
    const table = await runDocket(['jobs', 'list', '--db', db.url, '--kind', 'list.a']);
    expect(table.code, describeRun(table)).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+STATE\s+QUEUE\s+KIND/);
    expect(lines).toHaveLength(3);
    // Aligned: every row's STATE column starts where the header's does.
    const stateColumn = lines[0]?.indexOf('STATE');
    for (const line of lines.slice(1)) expect(line.indexOf('pending')).toBe(stateColumn);

    const json = await runDocket(['jobs', 'list', '--db', db.url, '--state', 'pending', '--kind', 'list.a', '--json']);
    expect((JSON.parse(json.stdout) as Job[]).map((job) => job.id)).toEqual([ids[0], ids[2]]);
    const paged = await runDocket(['jobs', 'list', '--db', db.url, '--after', ids[0]!, '--limit', '1', '--json']);
    expect((JSON.parse(paged.stdout) as Job[]).map((job) => job.id)).toEqual([ids[1]]);
  });

  it('cancels a pending job once, then reports it already finished with exit 1', async () => {
    const submitted = await runDocket(['submit', '--db', db.url, '--kind', 'cancel.me', '--delay-ms', '60000']);
    const id = submitted.stdout.trim();
    const cancelled = await runDocket(['jobs', 'cancel', id, '--db', db.url]);
    expect(cancelled.code, describeRun(cancelled)).toBe(0);
    expect(cancelled.stdout).toContain(`cancelled job ${id}`);
    const again = await runDocket(['jobs', 'cancel', id, '--db', db.url]);
    expect(again.code, describeRun(again)).toBe(1);
    expect(again.stderr).toContain('already finished');
    const shown = await runDocket(['jobs', 'show', id, '--db', db.url, '--json']);
    expect((JSON.parse(shown.stdout) as Job).state).toBe('cancelled');
  });

  it('exits 1 with a clear message for an unknown job', async () => {
    const results = await Promise.all([
      runDocket(['jobs', 'show', '987654', '--db', db.url]),
      runDocket(['jobs', 'cancel', '987654', '--db', db.url]),
      runDocket(['dead', 'retry', '987654', '--db', db.url]),
    ]);
    for (const result of results) expect(result.code, describeRun(result)).toBe(1);
    expect(results[0]?.stderr).toContain('error: job 987654 not found');
    expect(results[1]?.stderr).toContain('error: job 987654 not found');
    expect(results[2]?.stderr).toContain('error: job 987654 is not in the dead-letter table');
  });

  it('exits 2 and names the flag for bad flags and invalid values', async () => {
    const cases: [string[], string][] = [
      [['submit', '--db', db.url], "required option '--kind <kind>' not specified"],
      [['submit', '--db', db.url, '--kind', 'x', '--payload', '{nope'], 'Not valid JSON'],
      [
        ['submit', '--db', db.url, '--kind', 'x', '--priority', 'high'],
        'error: invalid --priority: priority: must be an integer, got "high"',
      ],
      [
        ['submit', '--db', db.url, '--kind', 'x', '--max-attempts', '0'],
        'error: invalid --max-attempts: maxAttempts: must be between 1 and 1000, got 0',
      ],
      [['submit', '--db', db.url, '--kind', 'x', '--run-at', 'tomorrow'], 'error: invalid --run-at: runAt:'],
      [
        ['submit', '--db', db.url, '--kind', 'x', '--run-at', '2030-01-01T00:00:00Z', '--delay-ms', '5'],
        'error: invalid --delay-ms: delayMs: give runAt or delayMs, not both',
      ],
      [['submit', '--db', db.url, '--kind', 'x', '--queue', 'no spaces'], 'error: invalid --queue: queue: must match'],
      [['submit', '--db', db.url, '--kind', 'x', '--bogus'], "unknown option '--bogus'"],
      [
        ['jobs', 'list', '--db', db.url, '--state', 'sleeping'],
        'error: invalid --state: states[0]: must be one of pending, running, done, cancelled, dead, got "sleeping"',
      ],
      [
        ['jobs', 'show', 'abc', '--db', db.url],
        'error: invalid <id>: id: must be a job id (decimal digits, at most 9007199254740991), got "abc"',
      ],
      [['dead', 'purge', '--db', db.url], 'error: give --id or --before'],
      [['submit', '--db', 'mysql://localhost/x', '--kind', 'x'], 'error: invalid --db: url: unknown store URL scheme'],
      [['frobnicate'], "unknown command 'frobnicate'"],
    ];
    // Four at a time: enough overlap to keep the test short without starving a 2-core machine.
    const results: CliResult[] = [];
    for (let i = 0; i < cases.length; i += 4) {
      results.push(...(await Promise.all(cases.slice(i, i + 4).map(([args]) => runDocket(args)))));
    }
    results.forEach((result, i) => {
      const [args, message] = cases[i]!;
      expect(result.code, `docket ${args.join(' ')}\n${describeRun(result)}`).toBe(2);
      expect(result.stderr, `docket ${args.join(' ')}`).toContain(message);
      expect(result.stdout).toBe('');
    });
  });

  it('reads the store from DOCKET_DATABASE_URL when --db is absent', async () => {
    const submitted = await runDocket(['submit', '--kind', 'env.job', '--delay-ms', '60000'], {
      env: { DOCKET_DATABASE_URL: db.url },
    });
    expect(submitted.code, describeRun(submitted)).toBe(0);
    const shown = await runDocket(['jobs', 'show', submitted.stdout.trim(), '--json', '--db', db.url]);
    expect((JSON.parse(shown.stdout) as Job).kind).toBe('env.job');
  });

  it('prints queue stats as a table and as JSON', async () => {
    const table = await runDocket(['stats', '--db', db.url]);
    expect(table.code, describeRun(table)).toBe(0);
    expect(table.stdout).toMatch(/^QUEUE\s+SCHEDULED\s+AVAILABLE\s+RUNNING\s+DONE\s+CANCELLED\s+DEAD/);
    const json = await runDocket(['stats', '--db', db.url, '--json']);
    const stats = JSON.parse(json.stdout) as { queue: string; scheduled: number; cancelled: number }[];
    expect(stats.find((row) => row.queue === 'default')?.cancelled).toBeGreaterThanOrEqual(1);
  });
});

describe('docket dead on sqlite', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** Parks `count` jobs by running a worker whose handler always throws, with one attempt each. */
  async function parkJobs(count: number): Promise<string[]> {
    const docket = await Docket.open({ url: db.url });
    try {
      docket.handle('always.fails', () => {
        throw new Error('upstream answered 503');
      });
      const parked = new Set<string>();
      const allParked = new Promise<void>((resolve) => {
        docket.events.on('parked', ({ job }) => {
          parked.add(job.id);
          if (parked.size === count) resolve();
        });
      });
      const results = await docket.submitMany(
        Array.from({ length: count }, () => ({ kind: 'always.fails', maxAttempts: 1 })),
      );
      const worker = docket.worker({ pollIntervalMs: 50, leaseMs: 5000 });
      await worker.start();
      await allParked;
      await worker.stop();
      return results.map((result) => result.id);
    } finally {
      await docket.close();
    }
  }

  it('lists, retries and purges dead letters, round trip', async () => {
    const [first, second, third] = await parkJobs(3);

    const table = await runDocket(['dead', 'list', '--db', db.url]);
    expect(table.code, describeRun(table)).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+QUEUE\s+KIND\s+ATTEMPTS\s+PARKED AT\s+LAST ERROR/);
    expect(table.stdout).toContain('upstream answered 503');
    const listed = JSON.parse((await runDocket(['dead', 'list', '--db', db.url, '--json'])).stdout) as Job[];
    expect(listed.map((job) => job.id)).toEqual([first, second, third]);
    expect(listed[0]?.errors[0]).toMatchObject({ attempt: 1, kind: 'thrown', message: 'upstream answered 503' });

    const retried = await runDocket(['dead', 'retry', first!, '--db', db.url, '--json']);
    expect(retried.code, describeRun(retried)).toBe(0);
    expect(JSON.parse(retried.stdout) as Job).toMatchObject({ id: first, state: 'pending', attempts: 0 });
    const shown = JSON.parse((await runDocket(['jobs', 'show', first!, '--db', db.url, '--json'])).stdout) as Job;
    expect(shown.state).toBe('pending');
    expect(shown.errors).toHaveLength(1);

    const purged = await runDocket(['dead', 'purge', '--id', second!, '--db', db.url]);
    expect(purged.code, describeRun(purged)).toBe(0);
    expect(purged.stdout).toContain('purged 1 dead letter');
    const purgedBefore = await runDocket([
      'dead',
      'purge',
      '--before',
      '2000-01-01T00:00:00Z',
      '--db',
      db.url,
      '--json',
    ]);
    expect(JSON.parse(purgedBefore.stdout)).toEqual({ purged: 0 });
    const purgedAll = await runDocket([
      'dead',
      'purge',
      '--before',
      new Date(Date.now() + 60_000).toISOString(),
      '--db',
      db.url,
      '--json',
    ]);
    expect(JSON.parse(purgedAll.stdout)).toEqual({ purged: 1 });

    const empty = await runDocket(['dead', 'list', '--db', db.url]);
    expect(empty.stdout.trim()).toBe('no dead letters');
    const gone = await runDocket(['jobs', 'show', third!, '--db', db.url]);
    expect(gone.code, describeRun(gone)).toBe(1);
  });
});
