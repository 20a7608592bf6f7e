/**
 * CI's counts: a test file that failed outside its tests (it did not load, or a beforeAll hook
 * failed and vitest reported its tests skipped) is a failure, never a quiet skip; so is an error
 * thrown outside any test, which vitest's JSON report leaves out (unhandled-errors-reporter.mjs).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { mergeVitestReports, readVitestReport, unhandledErrorsPathFor } from '../../scripts/vitest-report.mjs';

const dir = mkdtempSync(join(tmpdir(), 'docket-vitest-report-'));
afterEach(() => {
  rmSync(join(dir, 'report.json'), { force: true });
  rmSync(join(dir, 'report.unhandled.json'), { force: true });
});

const UNHANDLED = {
  message: 'a pg client with no error listener received: terminating connection\nmore',
  stack:
    'Error: a pg client…\n    at Client.emit (/repo/node_modules/pg/lib/client.js:1:1)\n    at Timeout.fire (/repo/src/store/postgres/listener.ts:40:5)',
  testFile: `${process.cwd()}/test/sharding/shards.test.ts`,
  testName: 'a shard stops',
};

function reportOf(testResults: unknown[], counts: Record<string, number>): string {
  const path = join(dir, 'report.json');
  writeFileSync(path, JSON.stringify({ ...counts, testResults }));
  return path;
}

describe('readVitestReport', () => {
  it('counts a file whose beforeAll failed (its tests reported skipped) as a failure', () => {
    const path = reportOf(
      [
        {
          name: '/repo/test/failover/failover.test.ts',
          status: 'failed',
          message: 'timed out after 60000 ms waiting for node1 to bootstrap and lead',
          assertionResults: [
            { status: 'passed', title: 'a' },
            { status: 'skipped', title: 'b' },
          ],
        },
        { name: '/repo/test/unit/x.test.ts', status: 'passed', assertionResults: [{ status: 'passed', title: 'c' }] },
      ],
      { numPassedTests: 2, numFailedTests: 0, numPendingTests: 1 },
    );
    const counts = readVitestReport(path);
    expect(counts.failed).toBe(1);
    expect(counts.brokenFiles.map((file: { name: string }) => file.name)).toEqual([
      '/repo/test/failover/failover.test.ts',
    ]);
  });

  it('does not count a file twice when one of its tests failed', () => {
    const path = reportOf(
      [{ name: '/repo/t.test.ts', status: 'failed', assertionResults: [{ status: 'failed', title: 'a' }] }],
      { numPassedTests: 0, numFailedTests: 1 },
    );
    expect(readVitestReport(path).failed).toBe(1);
  });

  it('counts and names each error thrown outside any test, written beside the report', () => {
    const path = reportOf(
      [{ name: '/repo/t.test.ts', status: 'passed', assertionResults: [{ status: 'passed', title: 'a' }] }],
      { numPassedTests: 1, numFailedTests: 0 },
    );
    expect(unhandledErrorsPathFor(path)).toBe(join(dir, 'report.unhandled.json'));
    writeFileSync(unhandledErrorsPathFor(path), JSON.stringify({ unhandledErrors: [UNHANDLED] }));
    const counts = readVitestReport(path);
    expect(counts.passed).toBe(1);
    expect(counts.failed).toBe(1);
    expect(counts.failedTests).toEqual([
      'unhandled error outside any test: a pg client with no error listener received: terminating connection ' +
        '[at Timeout.fire (/repo/src/store/postgres/listener.ts:40:5)] ' +
        '(surfaced during test/sharding/shards.test.ts > a shard stops)',
    ]);
  });
});

describe('unhandled-errors-reporter.mjs', () => {
  it('writes the errors a real vitest run threw outside its tests, and none for a clean run', () => {
    // Inside the checkout (test-artifacts/ is ignored by git) so the probes resolve 'vitest'.
    mkdirSync(join(process.cwd(), 'test-artifacts'), { recursive: true });
    const probes = mkdtempSync(join(process.cwd(), 'test-artifacts', 'unhandled-probe-'));
    writeFileSync(
      join(probes, 'leaves-an-error.test.mjs'),
      `import { test } from 'vitest';
       test('passes', async () => {
         setTimeout(() => { throw new Error('probe: thrown outside any test'); }, 5);
         await new Promise((resolve) => setTimeout(resolve, 50));
       });`,
    );
    // Its own config, or vitest would find the checkout's (whose include names test/ and src/).
    writeFileSync(join(probes, 'vitest.config.mjs'), `export default { test: { include: ['*.test.mjs'] } };`);
    writeFileSync(join(probes, 'clean.test.mjs'), `import { test } from 'vitest'; test('passes', () => {});`);
    const runProbe = (file: string) => {
      const output = join(probes, `${file}.unhandled.json`);
      const run = spawnSync(
        process.execPath,
        [
          join(process.cwd(), 'node_modules', 'vitest', 'vitest.mjs'),
          'run',
          file,
          '--root',
          probes,
          '--config',
          join(probes, 'vitest.config.mjs'),
          '--reporter=dot',
          `--reporter=${join(process.cwd(), 'scripts', 'unhandled-errors-reporter.mjs')}`,
        ],
        { cwd: probes, env: { ...process.env, DOCKET_UNHANDLED_ERRORS_FILE: output }, encoding: 'utf8' },
      );
      expect(existsSync(output), run.stdout + run.stderr).toBe(true);
      return { status: run.status, errors: JSON.parse(readFileSync(output, 'utf8')).unhandledErrors };
    };
    try {
      const leaky = runProbe('leaves-an-error.test.mjs');
      expect(leaky.status).toBe(1);
      expect(leaky.errors).toHaveLength(1);
      expect(leaky.errors[0].message).toBe('probe: thrown outside any test');
      expect(leaky.errors[0].stack).toContain('leaves-an-error.test.mjs');
      expect(leaky.errors[0].testName).toBe('passes');
      const clean = runProbe('clean.test.mjs');
      expect(clean).toEqual({ status: 0, errors: [] });
    } finally {
      rmSync(probes, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('mergeVitestReports', () => {
  it('sums the phases and counts a phase that wrote no report as a failure', () => {
    const first = join(dir, 'first.json');
    writeFileSync(
      first,
      JSON.stringify({
        numPassedTests: 3,
        numFailedTests: 1,
        numPendingTests: 0,
        testResults: [
          { name: '/repo/a.test.ts', status: 'failed', assertionResults: [{ status: 'failed', title: 'x' }] },
        ],
      }),
    );
    writeFileSync(unhandledErrorsPathFor(first), JSON.stringify({ unhandledErrors: [UNHANDLED] }));
    const merged = mergeVitestReports([first, join(dir, 'never-written.json')]);
    const path = join(dir, 'report.json');
    writeFileSync(path, JSON.stringify(merged));
    const counts = readVitestReport(path);
    expect(counts.passed).toBe(3);
    expect(counts.failed).toBe(3);
    expect(counts.failedTests).toHaveLength(2);
    expect(counts.failedTests[1]).toMatch(/^unhandled error outside any test: a pg client/);
    expect(counts.brokenFiles.map((file: { name: string }) => file.name)).toEqual([join(dir, 'never-written.json')]);
    rmSync(first);
    rmSync(unhandledErrorsPathFor(first));
  });
});
