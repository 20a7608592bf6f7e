/**
 * bench/claim-many-groups.ts (decision 0026) at a tiny size, so it cannot rot: this checkout
 * against itself as the baseline, one round, on both stores, a shape of one kind, one of
 * several, and one with its priorities queued in blocks. Speed is not judged here; the script is run by hand (docs/benchmarks.md).
 */
import { describe, expect, it } from 'vitest';
import { runTsxScript } from '../support/run-tsx-script.js';

function runScript(args: string[]): Promise<{ code: number | null; output: string }> {
  return runTsxScript('bench/claim-many-groups.ts', args);
}

describe('bench/claim-many-groups.ts', () => {
  for (const store of ['postgres', 'sqlite']) {
    it(`drains and claims a backlog of one kind and of several on ${store}, each tree a child`, async () => {
      const { code, output } = await runScript([
        '--baseline',
        '.',
        '--store',
        store,
        '--shapes',
        '1x1,3x2,1x2b',
        '--jobs',
        '9150',
        '--rounds',
        '1',
      ]);
      expect(code, output.slice(-4000)).toBe(0);
      expect(output).toMatch(/^1 kinds x 1 priorities: drain \d+ \/ \d+ \([\d.]+x\) jobs\/s; claim of 10 /m);
      expect(output).toMatch(/^3 kinds x 2 priorities: drain \d+ \/ \d+ \([\d.]+x\) jobs\/s; claim of 10 /m);
      expect(output).toMatch(
        /^1 kinds x 2 priorities \(blocked\): drain \d+ \/ \d+ \([\d.]+x\) jobs\/s; claim of 10 /m,
      );
    }, 120_000);
  }

  it('refuses a shape it cannot read, naming it', async () => {
    const { code, output } = await runScript(['--baseline', '.', '--shapes', '10by2']);
    expect(code).not.toBe(0);
    expect(output).toContain(
      '--shapes takes KxP pairs (kinds x priorities) like 100x1, or KxPb for priorities queued in blocks, got "10by2"',
    );
  }, 60_000);
});
