/**
 * The benchmark's pure parts that decide what a report says: the soak's flag parsing, flatness and
 * backlog verdicts, the description of a latest peer rebuilt for the harness's concurrency, and
 * the Node line flags (--docket-node, --baseline-node), and one spike's lateness among a worker's
 * several.
 */
import { describe, expect, it } from 'vitest';
import { hostCpuShares, postgresCpuSinceMs } from '../../bench/host-cpu.js';
import { pinnedNodeMajor } from '../../bench/peers-latest/latest.js';
import { interpolateDescription } from '../../bench/peers-latest/remote-system.js';
import {
  backlogVerdict,
  claimTimeCompanions,
  judgeFlatness,
  parseSoakOptions,
  quietWindowFlatness,
  rollingMedian,
  type SoakOptions,
  type SoakResult,
  type SoakSample,
} from '../../bench/soak.js';
import { correlation } from '../../bench/stats.js';
import { benchKindName, benchKindNames, refuseKinds, type SystemConfig } from '../../bench/systems/system.js';
import { spikeLateness } from '../../bench/workloads.js';
import { DEFAULT_PRUNE_INTERVAL_MS, DEFAULT_RETENTION_MS } from '../../src/docket.js';

function sample(atS: number, overrides: Partial<SoakSample> = {}): SoakSample {
  return {
    atS,
    submitted: 0,
    submittedPerSec: 1_000,
    submitCallP50Ms: 1,
    submitCallP99Ms: 2,
    started: 0,
    startedPerSec: 1_000,
    startLatencyP50Ms: 3,
    startLatencyP99Ms: 5,
    backlog: 10,
    claims: 100,
    rowsPerClaim: 10,
    claimP50Ms: 2,
    claimP99Ms: 8,
    claimMaxMs: 20,
    prunes: 0,
    prunedRows: 0,
    workerRssMb: 120,
    workerHeapMb: 40,
    tableMb: 50,
    heapMb: 40,
    indexesMb: 10,
    liveTuples: 0,
    deadTuples: 0,
    autovacuums: 0,
    vacuums: 0,
    ...overrides,
  };
}

const SHORT: SoakOptions = {
  minutes: 30,
  ratePerSec: 1_000,
  retentionMs: 5 * 60_000,
  pruneIntervalMs: 60_000,
  sampleSeconds: 30,
  vacuumSeconds: 0,
  concurrency: 24,
};

describe('soak flags', () => {
  it('defaults to the issue soak: 30 min at 1,000/s with Docket’s own retention and prune interval', () => {
    expect(parseSoakOptions({}, 24)).toEqual({
      minutes: 30,
      ratePerSec: 1_000,
      retentionMs: DEFAULT_RETENTION_MS,
      pruneIntervalMs: DEFAULT_PRUNE_INTERVAL_MS,
      sampleSeconds: 30,
      vacuumSeconds: 0,
      concurrency: 24,
    });
  });

  it('takes --retention-ms 0: no done records, as Docket.open does', () => {
    expect(parseSoakOptions({ 'retention-ms': '0' }, 24).retentionMs).toBe(0);
  });

  it('refuses bad values, naming the flag', () => {
    expect(() => parseSoakOptions({ minutes: '-1' }, 24)).toThrow(/--minutes must be a positive number, got "-1"/);
    expect(() => parseSoakOptions({ 'retention-ms': '1.5' }, 24)).toThrow(/--retention-ms must be a positive integer/);
    expect(() => parseSoakOptions({ rate: 'fast' }, 24)).toThrow(/--rate must be a positive integer/);
    expect(() => parseSoakOptions({ minutes: '1', 'sample-seconds': '90' }, 24)).toThrow(/longer than the soak/);
  });
});

describe('soak flatness', () => {
  const times = Array.from({ length: 60 }, (_, k) => (k + 1) * 30);

  it('judges only the samples after the first prune cycle, and passes steady metrics', () => {
    // A slow start before the first prune cycle (60 s + one sample) must not count.
    const samples = times.map((t) => sample(t, t <= 90 ? { claimP50Ms: 50, workerRssMb: 300 } : {}));
    const verdicts = judgeFlatness(samples, SHORT);
    expect(verdicts.map((v) => [v.metric, v.flat])).toEqual([
      ['claim p50', true],
      ['claim p99', true],
      ['worker RSS', true],
      ['table size', true],
    ]);
  });

  it('flags a table that keeps growing although pruning should have caught up', () => {
    const samples = times.map((t) => sample(t, { tableMb: t / 10 }));
    const table = judgeFlatness(samples, SHORT).find((v) => v.metric === 'table size');
    expect(table?.flat).toBe(false);
    expect(table?.maxPct).toBeGreaterThan(20);
  });

  it('does not judge table size when the retention outlasts the soak (nothing is old enough to prune)', () => {
    const samples = times.map((t) => sample(t, { tableMb: t / 10 }));
    const table = judgeFlatness(samples, { ...SHORT, retentionMs: DEFAULT_RETENTION_MS }).find(
      (v) => v.metric === 'table size',
    );
    expect(table?.judged).toBe(false);
    expect(table?.flat).toBeNull();
    expect(table?.note).toMatch(/--retention-ms/);
  });

  it('reads one slow window of claim p99 as noise, a sustained rise as a trend', () => {
    const spike = times.map((t) => sample(t, t === 900 ? { claimP99Ms: 80 } : {}));
    expect(judgeFlatness(spike, SHORT).find((v) => v.metric === 'claim p99')?.flat).toBe(true);
    const rise = times.map((t) => sample(t, { claimP99Ms: t > 900 ? 20 : 8 }));
    expect(judgeFlatness(rise, SHORT).find((v) => v.metric === 'claim p99')?.flat).toBe(false);
  });

  it('leaves the end-state sample, taken after the offer ended, out of the verdicts', () => {
    // The last jobs' starts with no load behind them: a few claims, one of them slow, and the
    // table as the soak left it.
    const end = sample(times.at(-1)! + 1, { claimP50Ms: 7.5, claimP99Ms: 7.5, workerRssMb: 300, afterOffer: true });
    const verdicts = judgeFlatness([...times.map((t) => sample(t)), end], SHORT);
    expect(verdicts.map((v) => [v.metric, v.flat])).toEqual([
      ['claim p50', true],
      ['claim p99', true],
      ['worker RSS', true],
      ['table size', true],
    ]);
  });

  it('reads a slow window at the start of the judged period as noise too', () => {
    // The first sample after the first prune cycle (60 s + one 30 s sample) is slow; a rolling
    // window cut short there would be that sample alone.
    const firstJudged = times.find((t) => t > 90)!;
    const edge = times.map((t) => sample(t, t === firstJudged ? { claimP99Ms: 20 } : {}));
    expect(judgeFlatness(edge, SHORT).find((v) => v.metric === 'claim p99')?.flat).toBe(true);
    const second = times.filter((t) => t > 90)[1]!;
    const two = times.map((t) => sample(t, t === firstJudged || t === second ? { claimP99Ms: 20 } : {}));
    expect(judgeFlatness(two, SHORT).find((v) => v.metric === 'claim p99')?.flat).toBe(false);
  });
});

describe('what moved with claim time', () => {
  const times = Array.from({ length: 60 }, (_, k) => (k + 1) * 30);

  it('correlates paired values, dropping pairs with a missing side', () => {
    expect(correlation([1, 2, 3, 4], [10, 20, 30, 40])).toBeCloseTo(1, 10);
    expect(correlation([1, 2, 3, 4], [40, 30, 20, 10])).toBeCloseTo(-1, 10);
    expect(correlation([1, 2, 3, 4, 5], [2, 1, 2, 1, 2])).toBeCloseTo(0, 10);
    expect(correlation([1, 2, Number.NaN, 4], [1, 2, 100, 4])).toBeCloseTo(1, 10);
    expect(correlation([1, 2], [1, 2])).toBeNaN();
    expect(correlation([3, 3, 3], [1, 2, 3])).toBeNaN();
  });

  it('reads the database CPU of a window per process, so an exited backend cannot make it negative', () => {
    const before = new Map([
      [10, 54_000], // a long-lived backend that exits during the window
      [11, 2_000],
      [12, 500],
    ]);
    const after = new Map([
      [11, 2_600],
      [12, 500],
      [13, 40], // a pooled connection opened during the window
    ]);
    expect(postgresCpuSinceMs(before, after)).toBe(640);
  });

  it('splits the host time of a window into busy and stolen shares', () => {
    const shares = hostCpuShares(
      { busyMs: 1000, idleMs: 500, stealMs: 0 },
      { busyMs: 1600, idleMs: 800, stealMs: 100 },
    );
    expect(shares.busy).toBeCloseTo(0.6, 10);
    expect(shares.steal).toBeCloseTo(0.1, 10);
    expect(shares.busyMs).toBe(600);
    expect(shares.totalMs).toBe(1000);
    expect(hostCpuShares({ busyMs: 0, idleMs: 0, stealMs: 0 }, { busyMs: 0, idleMs: 0, stealMs: 0 }).busy).toBeNaN();
  });

  it('judges claim time again over the windows the machine left alone, beside the verdict', () => {
    // Slow windows only where the hypervisor stole the cores or another program ran.
    const samples = times.map((t, k) =>
      sample(t, {
        claimP50Ms: k % 10 === 5 ? 4 : 2,
        claimP99Ms: k % 10 === 5 ? 16 : 8,
        hostStealPct: k % 20 === 5 ? 7 : 0.5,
        outsideCpuPct: k % 20 === 15 ? 20 : 1,
      }),
    );
    expect(judgeFlatness(samples, SHORT).find((v) => v.metric === 'claim p50')?.flat).toBe(false);
    const quiet = quietWindowFlatness(samples, SHORT);
    expect(quiet?.judged).toBe(57);
    expect(quiet?.quiet).toBe(51);
    expect(quiet?.verdicts.map((v) => [v.metric, v.flat])).toEqual([
      ['claim p50', true],
      ['claim p99', true],
    ]);
    // A slow window the machine did not explain stays slow.
    const unexplained = samples.map((s, k) => (k === 40 ? { ...s, claimP50Ms: 4 } : s));
    expect(quietWindowFlatness(unexplained, SHORT)?.verdicts[0]?.flat).toBe(false);
    // A soak that did not measure the host is not re-judged.
    expect(
      quietWindowFlatness(
        times.map((t) => sample(t)),
        SHORT,
      ),
    ).toBeNull();
  });

  it('tells a claim-time swing that follows the host from one that follows the database per job', () => {
    // Claim time swings with the host's load; the database's CPU per job holds still.
    const samples = times.map((t, k) =>
      sample(t, {
        claimP50Ms: 1 + (k % 3),
        hostBusyPct: 50 + 10 * (k % 3),
        databaseCpuUsPerJob: k % 2 === 0 ? 30 : 31,
        workerCpuUsPerJob: 12,
        // Before the judged period (the first prune cycle and a sample): left out.
        ...(t <= 90 ? { hostStealPct: 99 } : { hostStealPct: 0.5 }),
      }),
    );
    const byName = new Map(claimTimeCompanions(samples, SHORT).map((c) => [c.metric, c]));
    expect(byName.get('host busy')?.withClaimP50).toBeCloseTo(1, 10);
    expect(Math.abs(byName.get('database CPU per job')?.withClaimP50 ?? 1)).toBeLessThan(0.2);
    expect(byName.get('host steal')?.max).toBe(0.5);
    // A measure that never moved has no correlation; one the soak did not record has no median.
    expect(byName.get('worker CPU per job')?.median).toBe(12);
    expect(byName.get('worker CPU per job')?.withClaimP50).toBeNaN();
    expect(byName.get('pending-index entries per scan')?.median).toBeNaN();
  });
});

describe('rolling median', () => {
  it('takes whole windows only, or every value when there are fewer', () => {
    expect(rollingMedian([9, 1, 1, 1], 3)).toEqual([1, 1]);
    expect(rollingMedian([1, 9, 9, 1], 3)).toEqual([9, 9]);
    expect(rollingMedian([4, 2, 7], 3)).toEqual([4]);
    expect(rollingMedian([5], 3)).toEqual([5]);
  });
});

describe('soak backlog verdict', () => {
  function result(backlogs: number[], achieved: number): SoakResult {
    return {
      command: '',
      startedAt: '',
      finishedAt: '',
      options: SHORT,
      postgresSettings: { autovacuum: 'on' },
      samples: backlogs.map((backlog, k) => sample(k * 30, { backlog })),
      prunes: [],
      flatness: [],
      totals: {
        offered: 0,
        submitted: 0,
        submitErrors: 0,
        started: 0,
        duplicates: 0,
        strays: 0,
        unfinished: 0,
        achievedRatePerSec: achieved,
      },
      problems: [],
    };
  }

  it('says none when every sample stays under a second of the offer and the offer was met', () => {
    expect(backlogVerdict(result([3, 40, 900], 990))).toMatch(/^none/);
  });

  it('says it did not keep up when the backlog grew or the submits fell short of the offer', () => {
    expect(backlogVerdict(result([3, 40, 5_000], 1_000))).toMatch(/kept up: no/);
    expect(backlogVerdict(result([3, 4], 700))).toMatch(/kept up: no.*70 %/);
  });
});

describe('latest peer descriptions', () => {
  it('rebuilds every concurrency-dependent number and keeps the constants', () => {
    const at1000 = 'run({ concurrency: 1000, preset: { localQueue: { size: 500 }, maxPoolSize: 1001 } }), workers 4000';
    const at2000 = 'run({ concurrency: 2000, preset: { localQueue: { size: 500 }, maxPoolSize: 2001 } }), workers 8000';
    expect(interpolateDescription(at1000, at2000, 24)).toBe(
      'run({ concurrency: 24, preset: { localQueue: { size: 500 }, maxPoolSize: 25 } }), workers 96',
    );
  });
});

describe('the Node line flags', () => {
  it('take a pinned major line', () => {
    expect(pinnedNodeMajor('docket-node', '24')).toBe(24);
    expect(pinnedNodeMajor('baseline-node', '22')).toBe(22);
    expect(pinnedNodeMajor('docket-node', '26')).toBe(26);
  });

  it('refuse anything else, naming the flag and the pinned lines', () => {
    for (const text of ['21', '20', '24.1', 'v24', '', ' 24', 'latest'])
      expect(() => pinnedNodeMajor('docket-node', text)).toThrow(
        `--docket-node must be one of the pinned Node lines 22, 24, 26, got ${JSON.stringify(text)}`,
      );
  });
});

describe('spike lateness', () => {
  // Two spikes of three jobs in one recorder: indices 0-2 due at 1,000, 3-5 due at 5,000.
  const starts = Float64Array.from([1_004, 999, 1_020, 5_002, 5_001, Number.NaN]);

  it('reads only its own spike’s indices, against its own due instant', () => {
    expect(spikeLateness(starts, 0, 3, 1_000)).toEqual({ lateness: [4, -1, 20], early: 1 });
  });

  it('leaves jobs that never started out of the lateness', () => {
    expect(spikeLateness(starts, 3, 6, 5_000)).toEqual({ lateness: [2, 1], early: 0 });
    expect(spikeLateness(Float64Array.from([Number.NaN]), 0, 1, 0)).toEqual({ lateness: [], early: 0 });
  });
});

describe('the kinds workload: names and refusals', () => {
  const config = (system: SystemConfig['system'], kinds?: number) => ({ system, kinds }) as SystemConfig;

  it('names kind 0 by the driver’s one-kind name, so a one-kind run is unchanged, and the rest after it', () => {
    expect([0, 1, 42].map((k) => benchKindName('bench.noop', k))).toEqual([
      'bench.noop',
      'bench.noop_1',
      'bench.noop_42',
    ]);
    expect(benchKindNames('noop', config('bullmq', 3))).toEqual(['noop', 'noop_1', 'noop_2']);
    expect(benchKindNames('noop', config('bullmq'))).toEqual(['noop']);
  });

  it('a driver that routes no kinds refuses more than one, naming itself and why', () => {
    expect(() => refuseKinds(config('pg-boss', 1), 'routes by queue')).not.toThrow();
    expect(() => refuseKinds(config('pg-boss'), 'routes by queue')).not.toThrow();
    expect(() => refuseKinds(config('pg-boss', 2), 'routes by queue')).toThrow(
      'pg-boss does not take more than one kind: routes by queue',
    );
  });
});
