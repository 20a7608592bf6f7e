/**
 * `docket work` as an operator runs it: a real process with a handlers module from disk, stopped by
 * SIGTERM. Checked against the store: the job it ran is done, the job it was running when told to
 * stop has its lease released (due again at once, attempt given back), and it exits 0.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { createTestDatabase, type TestDatabase } from '../support/stores.js';
import { describeRun, runDocket, startDocket } from './run-docket.js';

const HANDLERS_OBJECT = `
import { appendFileSync } from 'node:fs';
export default {
  // Records each run keyed by job id, so a test can see the handler really ran, and how often.
  'note.write': async (payload, ctx) => {
    appendFileSync(process.env.DOCKET_TEST_MARKS, JSON.stringify({ id: ctx.jobId, payload, token: ctx.token }) + '\\n');
  },
  // Runs until its signal aborts: the job a graceful stop must release.
  'slow.wait': (payload, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve())),
};
`;

const HANDLERS_SETUP = `
import { appendFileSync } from 'node:fs';
export default async function setup(docket) {
  docket.handle('setup.write', async (payload, ctx) => {
    appendFileSync(process.env.DOCKET_TEST_MARKS, JSON.stringify({ id: ctx.jobId, payload }) + '\\n');
  });
}
`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'docket-cli-work-'));
  writeFileSync(join(dir, 'handlers.mjs'), HANDLERS_OBJECT);
  writeFileSync(join(dir, 'setup.mjs'), HANDLERS_SETUP);
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function marks(file: string): { id: string; payload: unknown }[] {
  try {
    return readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { id: string; payload: unknown });
  } catch {
    return [];
  }
}

describe.each(['sqlite', 'postgres'] as const)('docket work on %s', (kind) => {
  let db: TestDatabase;
  let store: Store;
  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await db.open();
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it("runs a handlers module's job, and on SIGTERM releases the running job's lease and exits 0", async () => {
    const marksFile = join(dir, `marks-${kind}.jsonl`);
    const submit = async (args: string[]) => {
      const result = await runDocket(['submit', '--db', db.url, ...args]);
      expect(result.code, describeRun(result)).toBe(0);
      return result.stdout.trim();
    };
    const quick = await submit(['--kind', 'note.write', '--payload', '{"n":42}']);
    const slow = await submit(['--kind', 'slow.wait']);

    const worker = startDocket(
      [
        'work',
        '--db',
        db.url,
        '--handlers',
        join(dir, 'handlers.mjs'),
        '--concurrency',
        '4',
        '--lease-ms',
        '30000',
        '--heartbeat-interval-ms',
        '10000',
        '--poll-interval-ms',
        '100',
        '--shutdown-grace-ms',
        '200',
        '--id',
        `cli-test-${kind}`,
      ],
      { env: { DOCKET_TEST_MARKS: marksFile } },
    );
    try {
      await expect.poll(async () => (await store.jobGet({ id: quick }))?.state, { timeout: 20_000 }).toBe('done');
      await expect
        .poll(async () => (await store.jobGet({ id: slow }))?.leaseOwner?.split('/')[0], { timeout: 20_000 })
        .toBe(`cli-test-${kind}`);
      expect(marks(marksFile)).toEqual([{ id: quick, payload: { n: 42 }, token: 1 }]);

      worker.child.kill('SIGTERM');
      const exit = await worker.exited;
      expect(exit.code, describeRun(exit)).toBe(0);
      expect(exit.stdout).toContain('stopping gracefully');
    } finally {
      worker.child.kill('SIGKILL');
    }
    // Released, not left to lapse: due again now with a 30 s lease that would otherwise hold it.
    const released = await store.jobGet({ id: slow });
    expect(released).toMatchObject({ state: 'pending', leaseUntil: null, attempts: 0, token: 1 });
    expect(released!.runAt.getTime()).toBeLessThanOrEqual((await store.now()).getTime());
  });
});

// Issue 10's CLI reproduction: `docket submit --kind new.kind`, then `docket work --handlers` with
// a module that lacks new.kind. The job must wait, pending and counted as unhandled, never claimed
// or parked; a worker whose module has the kind (the next deploy) then runs it, in one attempt.
const HANDLERS_NEW_KIND = `
import { appendFileSync } from 'node:fs';
export default {
  'new.kind': async (payload, ctx) => {
    appendFileSync(process.env.DOCKET_TEST_MARKS, JSON.stringify({ id: ctx.jobId, payload, token: ctx.token }) + '\\n');
  },
};
`;

describe.each(['sqlite', 'postgres'] as const)('docket work routing on %s', (kind) => {
  let db: TestDatabase;
  let store: Store;
  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await db.open();
    writeFileSync(join(dir, 'handlers-new-kind.mjs'), HANDLERS_NEW_KIND);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('a kind no running worker has waits as unhandled, never parked, and runs once a worker with it starts', async () => {
    const marksFile = join(dir, `marks-new-kind-${kind}.jsonl`);
    const submitted = await runDocket(['submit', '--db', db.url, '--kind', 'new.kind', '--payload', '{"v":2}']);
    expect(submitted.code, describeRun(submitted)).toBe(0);
    const id = submitted.stdout.trim();
    const witness = await runDocket(['submit', '--db', db.url, '--kind', 'note.write']);
    const witnessId = witness.stdout.trim();
    const workerArgs = (handlers: string, workerId: string) => [
      'work',
      '--db',
      db.url,
      '--handlers',
      join(dir, handlers),
      '--poll-interval-ms',
      '100',
      '--shutdown-grace-ms',
      '200',
      '--id',
      workerId,
    ];

    const old = startDocket(workerArgs('handlers.mjs', `old-${kind}`), { env: { DOCKET_TEST_MARKS: marksFile } });
    try {
      // The old worker is up and claiming (it ran the witness job), yet never touched new.kind.
      await expect.poll(async () => (await store.jobGet({ id: witnessId }))?.state, { timeout: 20_000 }).toBe('done');
      await new Promise((resolve) => setTimeout(resolve, 500)); // several of its 100 ms polls
      expect(await store.jobGet({ id })).toMatchObject({ state: 'pending', attempts: 0, token: 0 });
      const stats = await runDocket(['stats', '--json', '--db', db.url]);
      expect(stats.code, describeRun(stats)).toBe(0);
      expect((JSON.parse(stats.stdout) as { queue: string; unhandled: number }[])[0]).toMatchObject({
        queue: 'default',
        unhandled: 1,
      });

      const fresh = startDocket(workerArgs('handlers-new-kind.mjs', `new-${kind}`), {
        env: { DOCKET_TEST_MARKS: marksFile },
      });
      try {
        await expect.poll(async () => (await store.jobGet({ id }))?.state, { timeout: 20_000 }).toBe('done');
        expect(await store.jobGet({ id })).toMatchObject({ attempts: 1, errors: [] });
        expect(await store.deadLetterList({})).toEqual([]);
        expect(marks(marksFile).filter((mark) => mark.id === id)).toEqual([{ id, payload: { v: 2 }, token: 1 }]);
      } finally {
        fresh.child.kill('SIGTERM');
        await fresh.exited;
      }
    } finally {
      old.child.kill('SIGTERM');
      await old.exited;
    }
  }, 60_000);
});

describe('docket work on sqlite', () => {
  let db: TestDatabase;
  let store: Store;
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    store = await db.open();
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('accepts a setup function as the default export and stops on SIGINT with exit 0', async () => {
    const marksFile = join(dir, 'marks-setup.jsonl');
    const submitted = await runDocket(['submit', '--db', db.url, '--kind', 'setup.write', '--payload', '"hi"']);
    const id = submitted.stdout.trim();
    const worker = startDocket(
      ['work', '--db', db.url, '--handlers', join(dir, 'setup.mjs'), '--poll-ms', '100', '--log-level', 'warn'],
      { env: { DOCKET_TEST_MARKS: marksFile } },
    );
    try {
      await expect.poll(async () => (await store.jobGet({ id }))?.state, { timeout: 20_000 }).toBe('done');
      expect(marks(marksFile)).toEqual([{ id, payload: 'hi' }]);
      worker.child.kill('SIGINT');
      const exit = await worker.exited;
      expect(exit.code, describeRun(exit)).toBe(0);
    } finally {
      worker.child.kill('SIGKILL');
    }
  });

  it('refuses unsafe worker settings and a missing handlers module with exit 2, an unloadable one with exit 1', async () => {
    const [unsafe, missing, notHandlers] = await Promise.all([
      runDocket([
        'work',
        '--db',
        db.url,
        '--handlers',
        join(dir, 'handlers.mjs'),
        '--lease-ms',
        '1000',
        '--heartbeat-ms',
        '900',
      ]),
      runDocket(['work', '--db', db.url, '--handlers', join(dir, 'nope.mjs')]),
      runDocket(['work', '--db', db.url, '--handlers', join(dir, 'marks-setup.jsonl')]),
    ]);
    expect(unsafe.code, describeRun(unsafe)).toBe(2);
    expect(unsafe.stderr).toContain('heartbeatIntervalMs (900 ms) must be at most half of leaseMs');
    expect(missing.code, describeRun(missing)).toBe(2);
    expect(missing.stderr).toContain('--handlers: no such file');
    expect(notHandlers.code, describeRun(notHandlers)).toBe(1);
    expect(notHandlers.stderr).toContain('--handlers: loading');
  });
});
