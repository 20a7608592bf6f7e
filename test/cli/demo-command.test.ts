/**
 * `docket demo` is a README quick-start command: it must play its whole story and exit 0. Run in
 * its fast settings through the package's bin (bin/docket.js), as `npx docket demo --fast` would.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, REPO_ROOT, runDocket } from './run-docket.js';

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

  it('refuses an in-memory store, which its worker processes could not share, with exit 2', async () => {
    const result = await runDocket(['demo', '--fast', '--db', 'sqlite::memory:']);
    expect(result.code, describeRun(result)).toBe(2);
    expect(result.stderr).toContain('sqlite::memory: cannot be shared');
  });
});
