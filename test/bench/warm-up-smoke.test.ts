/**
 * bench/warm-up.ts at a tiny size, so it cannot rot: one worker process, two small drains, with
 * the compile times read from V8's trace. Speed is not judged here; the script is run by hand
 * (docs/benchmarks.md, twenty-fourth session).
 */
import { describe, expect, it } from 'vitest';
import { runTsxScript } from '../support/run-tsx-script.js';

describe('bench/warm-up.ts', () => {
  it('drains two backlogs in one running worker and prints each drain, its compile times and the medians', async () => {
    const { code, output } = await runTsxScript('bench/warm-up.ts', [
      '--jobs',
      '300',
      '--drains',
      '2',
      '--rounds',
      '1',
      '--compiles',
    ]);
    expect(code, output.slice(-4000)).toBe(0);
    const drain = (n: number) =>
      new RegExp(
        `^round 1 drain ${n}: \\d+ jobs/s, worker CPU [\\d.]+ µs a job, \\d+ GCs \\(\\d+ ms\\), compiled Maglev \\d+ ms, Turbofan \\d+ ms$`,
        'm',
      );
    expect(output).toMatch(drain(1));
    expect(output).toMatch(drain(2));
    expect(output).toMatch(
      /^300 jobs a drain, docket\.worker\(\{ concurrency: 24, prefetch: 500 \}\) on Node [\d.]+; medians of 1 process:$/m,
    );
    expect(output).toMatch(/^last drain ÷ first: rate [\d.]+, worker CPU a job [\d.]+$/m);
  }, 120_000);

  it('refuses a single drain, which has nothing to compare with', async () => {
    const { code, output } = await runTsxScript('bench/warm-up.ts', ['--drains', '1']);
    expect(code).not.toBe(0);
    expect(output).toContain('--drains must be at least 2: the first drain is compared with the later ones');
  }, 60_000);
});
