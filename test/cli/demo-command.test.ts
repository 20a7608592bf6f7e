/**
 * `docket demo` is a README quick-start command: it must play its whole story and exit 0. Run in
 * its fast settings through the package's bin (bin/docket.js), as `npx docket demo --fast` would.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError } from '../../src/cli/cli-error.js';
import { DEMO_MARKER_QUEUE, prepareDemoDatabase } from '../../src/cli/demo/run-demo.js';
import { Docket } from '../../src/docket.js';
import { createTestDatabase, storeKinds } from '../support/stores.js';
import { describeRun, REPO_ROOT, runDocket, startDocket } from './run-docket.js';

describe('docket demo', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-cli-demo-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('plays the whole story with real worker processes and exits 0 when every check holds', async () => {
    const startedAt = Date.now();
    const result = await runDocket(['demo', '--fast', '--db', `sqlite:${join(dir, 'demo.db')}`], {
      entry: [resolve(REPO_ROOT, 'bin/docket.js')],
    });
    expect(result.code, describeRun(result)).toBe(0);
    expect(Date.now() - startedAt).toBeLessThan(45_000);
    const out = result.stdout;
    expect(out).toMatch(/kill -9\s+child-A \(pid \d+\) killed mid-job/);
    expect(out).toMatch(/claim\s+job \d+ \(demo\.report\) by local-rescue: token 2/);
    expect(out).toMatch(/replay\s+child-B's completion with token 1 sent through the Store: 'stale'/);
    expect(out).toMatch(/Dead letter: job \d+ \(demo\.flaky-webhook\)/);
    expect(out).toMatch(/attempt 5 .*thrown: upstream answered 503/);
    expect(out).not.toContain('FAIL');
    expect(out).toMatch(/all \d+ checks passed/);
  }, 60_000);

  it('with --serve, then serves the dashboard over the story’s store until SIGINT, and exits 0', async () => {
    const running = startDocket([
      'demo',
      '--fast',
      '--serve',
      '--port',
      '0',
      '--db',
      `sqlite:${join(dir, 'served.db')}`,
    ]);
    try {
      await expect
        .poll(() => running.output().stdout, { timeout: 45_000, interval: 200 })
        .toMatch(/Dashboard: http:\/\/127\.0\.0\.1:\d+\//);
      const url = /Dashboard: (http:\/\/127\.0\.0\.1:\d+)\//.exec(running.output().stdout)?.[1];
      const page = await fetch(`${url}/`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
      // The story's dead letter is there for the page's Retry button (tokenless: loopback rules).
      const dead = (await (await fetch(`${url}/v1/dead-letters`)).json()) as { jobs: { kind: string }[] };
      expect(dead.jobs.map((job) => job.kind)).toEqual(['demo.flaky-webhook']);
    } finally {
      running.child.kill('SIGINT');
    }
    const result = await running.exited;
    expect(result.code, describeRun(result)).toBe(0);
  }, 60_000);

  it('refuses --port without --serve with exit 2', async () => {
    const result = await runDocket(['demo', '--fast', '--port', '9000', '--db', `sqlite:${join(dir, 'x.db')}`]);
    expect(result.code, describeRun(result)).toBe(2);
    expect(result.stderr).toContain('--port applies to --serve only');
  });

  it('refuses an in-memory store, which its worker processes could not share, with exit 2', async () => {
    const result = await runDocket(['demo', '--fast', '--db', 'sqlite::memory:']);
    expect(result.code, describeRun(result)).toBe(2);
    expect(result.stderr).toContain('sqlite::memory: cannot be shared');
  });
});

describe('docket demo never touches a store it did not create', () => {
  it('refuses an existing SQLite database with exit 2 and leaves it and its jobs alone, unless --force', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-cli-demo-keep-'));
    try {
      const url = `sqlite:${join(dir, 'keep.db')}`;
      const docket = await Docket.open({ url });
      const { id } = await docket.submit({ kind: 'precious.job', delayMs: 3_600_000 });
      await docket.close();
      const result = await runDocket(['demo', '--fast', '--db', url]);
      expect(result.code, describeRun(result)).toBe(2);
      expect(result.stderr).toContain('is a Docket store the demo did not create');
      expect(result.stderr).toContain('--force');
      const reopened = await Docket.open({ url });
      try {
        expect((await reopened.getJob(id))?.kind).toBe('precious.job');
      } finally {
        await reopened.close();
      }
      // With --force the demo may use it (a SQLite file is then deleted and recreated).
      await expect(prepareDemoDatabase(url, true)).resolves.toMatchObject({ fresh: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each(storeKinds())(
    'on %s: uses a new store, reuses one it marked, refuses one with user data or not Docket at all',
    async (kind) => {
      const db = await createTestDatabase(kind);
      try {
        await expect(prepareDemoDatabase(db.url, false)).resolves.toBeDefined();
        const docket = await Docket.open({ url: db.url });
        try {
          await docket.submit({ kind: 'user.job', delayMs: 3_600_000 });
          const refused = await prepareDemoDatabase(db.url, false).catch((error: unknown) => error);
          expect(refused).toBeInstanceOf(CliError);
          expect((refused as CliError).exitCode).toBe(2);
          expect((refused as CliError).message).toContain('is a Docket store the demo did not create');
          // The mark a demo run leaves: the next run may reuse the store.
          await docket.pauseQueue(DEMO_MARKER_QUEUE);
          await expect(prepareDemoDatabase(db.url, false)).resolves.toBeDefined();
          if (kind === 'postgres') expect((await docket.listJobs()).map((job) => job.kind)).toEqual(['user.job']);
        } finally {
          await docket.close();
        }
      } finally {
        await db.drop();
      }
    },
  );

  it('refuses a SQLite file that is not a Docket store', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-cli-demo-other-'));
    try {
      const path = join(dir, 'notes.txt');
      writeFileSync(path, 'not a database');
      const refused = await prepareDemoDatabase(`sqlite:${path}`, false).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(CliError);
      expect((refused as CliError).message).toContain('exists and is not a Docket store');
      expect(readFileSync(path, 'utf8')).toBe('not a database');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
