/**
 * The bench's cross-process clock (bench/pg-admin.ts, hostNowMs): the host's monotonic clock plus
 * one anchor that a process hands to the processes it starts, so a submit timed in the harness
 * and a start timed in a worker are read on the same clock whatever the wall clock does (this VM's
 * has stepped 2.7 s and run 5 ms a second ahead of the monotonic clock for minutes).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLOCK_ANCHOR_ENV, clockAnchorMs, hostNowMs } from '../../bench/pg-admin.js';

const PG_ADMIN = fileURLToPath(new URL('../../bench/pg-admin.ts', import.meta.url));

afterEach(() => {
  vi.restoreAllMocks();
});

/** hostNowMs and the anchor as a freshly started Node process reads them, with `env`. */
function childReading(env: NodeJS.ProcessEnv): { nowMs: number; anchorMs: number } {
  const script = `import(${JSON.stringify(PG_ADMIN)}).then((m) => process.stdout.write(JSON.stringify({ nowMs: m.hostNowMs(), anchorMs: m.clockAnchorMs() })))`;
  const output = execFileSync(process.execPath, ['--import', 'tsx', '-e', script], { env, encoding: 'utf8' });
  return JSON.parse(output) as { nowMs: number; anchorMs: number };
}

describe('bench cross-process clock', () => {
  it('does not follow a step of the wall clock', () => {
    const before = hostNowMs();
    vi.spyOn(Date, 'now').mockReturnValue(Date.now() + 2_700);
    const after = hostNowMs();
    expect(after - before).toBeGreaterThanOrEqual(0);
    expect(after - before).toBeLessThan(1_000);
  });

  it('anchors a process without an inherited anchor on the wall clock and hands the anchor on', () => {
    const env: NodeJS.ProcessEnv = {};
    const anchor = clockAnchorMs(env);
    expect(env[CLOCK_ANCHOR_ENV]).toBe(String(anchor));
    // The anchor puts the monotonic clock near the wall clock at the moment it was taken.
    expect(Math.abs(anchor + Number(process.hrtime.bigint()) / 1e6 - Date.now())).toBeLessThan(1_000);
    // Taken again from the same environment, it is the one handed on, not a new reading.
    expect(clockAnchorMs(env)).toBe(anchor);
  });

  it('a started process reads the same clock as the one that started it, even with a skewed anchor', () => {
    // An anchor a whole hour off the wall clock: a child that anchored itself on the wall clock
    // would read an hour away from the parent; one that inherits it reads between the parent's two
    // readings around its start.
    const skewedAnchor = clockAnchorMs({}) - 3_600_000;
    const env = { ...process.env, [CLOCK_ANCHOR_ENV]: String(skewedAnchor) };
    const monotonicNow = () => Number(process.hrtime.bigint()) / 1e6;
    const before = monotonicNow() + skewedAnchor;
    const child = childReading(env);
    const after = monotonicNow() + skewedAnchor;
    expect(child.anchorMs).toBe(skewedAnchor);
    expect(child.nowMs).toBeGreaterThanOrEqual(before);
    expect(child.nowMs).toBeLessThanOrEqual(after);
  });
});
