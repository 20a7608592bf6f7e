/**
 * The store connection's loss and recovery are logged once per outage: calls that were stuck in
 * the outage and fail just after the recovery (a healed partition answers them late) are not a new
 * outage, while a real new outage is logged once its failures outlast the settle window.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import { DocketEvents } from '../../src/worker/docket-events.js';
import { type Logger, silentLogger } from '../../src/worker/logger.js';
import { RECOVERY_SETTLE_MS, WorkerReporter } from '../../src/worker/worker-reporter.js';

function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (_fields: unknown, message: string) => lines.push(`${level} ${message}`);
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

const connectionLines = (lines: string[]) => lines.filter((line) => /^(warn|info) docket: store connection/.test(line));

describe('WorkerReporter, store connection loss and recovery', () => {
  it('logs one loss and one recovery when calls from the outage fail just after it recovered', () => {
    const clock = new ManualClock(0);
    const { logger, lines } = recordingLogger();
    const report = new WorkerReporter('w', logger, new DocketEvents(silentLogger), clock);
    report.error(new Error('Connection terminated unexpectedly'), 'claim');
    clock.advance(5000);
    report.error(new Error('Connection terminated unexpectedly'), 'claim');
    report.storeAnswered();
    // A heartbeat and a completion sent during the outage come back failed 25 and 330 ms later.
    clock.advance(25);
    report.error(new Error('Query read timeout'), 'heartbeat');
    clock.advance(305);
    report.error(new Error('Query read timeout'), 'complete');
    report.storeAnswered();
    expect(connectionLines(lines)).toEqual([
      'warn docket: store connection lost; claims back off and outcome writes are retried while leases last',
      'info docket: store connection recovered',
    ]);
    expect(report.counters.errors).toBe(4);
  });

  it('logs a real new outage once its failures outlast the settle window', () => {
    const clock = new ManualClock(0);
    const { logger, lines } = recordingLogger();
    const report = new WorkerReporter('w', logger, new DocketEvents(silentLogger), clock);
    report.error(new Error('down'), 'claim');
    clock.advance(1000);
    report.storeAnswered();
    clock.advance(100);
    report.error(new Error('down again'), 'claim');
    clock.advance(RECOVERY_SETTLE_MS);
    report.error(new Error('down again'), 'claim');
    clock.advance(2000);
    report.storeAnswered();
    expect(connectionLines(lines).map((line) => line.split(';')[0])).toEqual([
      'warn docket: store connection lost',
      'info docket: store connection recovered',
      'warn docket: store connection lost',
      'info docket: store connection recovered',
    ]);
  });
});
