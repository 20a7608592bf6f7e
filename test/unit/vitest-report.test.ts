/**
 * CI's counts: a test file that failed outside its tests (it did not load, or a beforeAll hook
 * failed and vitest reported its tests skipped) is a failure, never a quiet skip.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { mergeVitestReports, readVitestReport } from '../../scripts/vitest-report.mjs';

const dir = mkdtempSync(join(tmpdir(), 'docket-vitest-report-'));
afterEach(() => rmSync(join(dir, 'report.json'), { force: true }));

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
    const merged = mergeVitestReports([first, join(dir, 'never-written.json')]);
    const path = join(dir, 'report.json');
    writeFileSync(path, JSON.stringify(merged));
    const counts = readVitestReport(path);
    expect(counts.passed).toBe(3);
    expect(counts.failed).toBe(2);
    expect(counts.brokenFiles.map((file: { name: string }) => file.name)).toEqual([join(dir, 'never-written.json')]);
    rmSync(first);
  });
});
