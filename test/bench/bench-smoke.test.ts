/**
 * The benchmark harness in smoke mode, so it cannot rot: every system (Docket on PostgreSQL and
 * SQLite, graphile-worker, pg-boss, BullMQ) runs every workload at tiny sizes, each run checked for
 * exactly-once execution, and the report is written; then the shard benchmark (`--shards --smoke`:
 * two throwaway clusters in CPU-capped cgroups, about 20 s) and a seconds-long soak with a short
 * retention. Speed is not judged here; `npm run bench` is.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runTsxScript } from '../support/run-tsx-script.js';

const outDir = mkdtempSync(join(tmpdir(), 'docket-bench-ci-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

function runBench(args: string[]): Promise<{ code: number | null; output: string }> {
  return runTsxScript('bench/run.ts', args);
}

describe('benchmark harness (smoke mode)', () => {
  it('runs every system and workload with no lost or doubled job, and writes the report', async () => {
    const { code, output } = await runBench(['--smoke', '--out', outDir]);
    expect(code, output.slice(-4000)).toBe(0);
    expect(output).not.toMatch(/NOT OK/);
    const report = readFileSync(join(outDir, 'RESULTS.md'), 'utf8');
    expect(report).toMatch(/graphile-worker/);
    expect(report).toMatch(/docket/);
    // Docket keeping no done records (retentionMs 0) drains beside the rest, every job once.
    expect(report).toMatch(/\| docket-lean \(default\) \|/);
    expect(report).toMatch(/\| docket-lean \(tuned\) \|/);
    expect(existsSync(join(outDir, 'results.json'))).toBe(true);
    // The raw-SQL reference drains beside Docket whenever the limit runs.
    expect(report).toMatch(/raw-sql/);
    // Every system's worker takes two spikes in a row; both are measured.
    const { runs } = JSON.parse(readFileSync(join(outDir, 'results.json'), 'utf8')) as {
      runs: {
        workload: string;
        label: string;
        status: string;
        problems: string[];
        params: { spikes?: number; neighbours?: number; jobs?: number };
        metrics: Record<string, number>;
      }[];
    };
    // The raw-SQL reference takes the single submits too (its own INSERT and NOTIFY per call, its
    // worker woken by LISTEN), both capacity and start latency, every job once.
    const rawSingles = runs.filter((run) => run.workload === 'single-submit' && run.label === 'raw-sql');
    expect(rawSingles.map((run) => [run.status, (run.params as { mode?: string }).mode]).sort()).toEqual([
      ['ok', 'capacity'],
      ['ok', 'latency'],
    ]);
    // A backfill meets a worker that already ran jobs on a small, analysed table (decision 0023).
    const backfills = runs.filter((run) => run.workload === 'backfill');
    expect(backfills.map((run) => run.label)).toEqual(expect.arrayContaining(['docket (default)', 'raw-sql']));
    for (const run of backfills) expect([run.label, run.status]).toEqual([run.label, 'ok']);
    expect(report).toMatch(/## 1c\. A backfill into a running worker/);
    // An outage: every first attempt throws; each job started once and its failure recorded (decision 0024).
    const outages = runs.filter((run) => run.workload === 'outage');
    expect(outages.map((run) => run.label)).toEqual(expect.arrayContaining(['docket (default)', 'docket (tuned)']));
    expect(outages.every((run) => run.label.startsWith('docket'))).toBe(true);
    for (const run of outages) expect([run.label, run.status]).toEqual([run.label, 'ok']);
    expect(report).toMatch(/## 1d\. A downstream outage/);
    // A backlog over ten kinds, a handler each, on Docket's default worker (PostgreSQL and SQLite)
    // and the peers that route kinds within one queue (not pg-boss, not the raw-SQL reference);
    // every job once.
    const kindRuns = runs.filter((run) => run.workload === 'kinds');
    expect(kindRuns.map((run) => run.label)).toEqual(
      expect.arrayContaining([
        'docket (default)',
        'docket-sqlite (default)',
        'graphile-worker (tuned)',
        'bullmq (tuned)',
      ]),
    );
    expect(kindRuns.some((run) => run.label.startsWith('pg-boss') || run.label === 'raw-sql')).toBe(false);
    for (const run of kindRuns) {
      expect([run.label, run.status, (run.params as { kinds?: number }).kinds]).toEqual([run.label, 'ok', 10]);
    }
    expect(report).toMatch(/## 1e\. A backlog over many job kinds/);
    const spikes = runs.filter((run) => run.workload === 'spike' && run.status === 'ok');
    expect(spikes.map((run) => run.label)).toContain('docket (default)');
    for (const run of spikes) {
      expect(run.params.spikes).toBe(2);
      expect(run.metrics.lastStartAfterDueMs).toBeGreaterThanOrEqual(0);
      expect(run.metrics.warmLatenessMaxMs).toBeGreaterThanOrEqual(0);
    }
    expect(report).toMatch(/2nd spike: last start, ms/);
    // A schedule spike: the runs of recurring schedules all due at one second.
    const scheduleSpikes = runs.filter((run) => run.workload === 'schedule-spike');
    expect(scheduleSpikes.map((run) => run.label).sort()).toEqual(['docket (default)', 'docket (tuned)']);
    for (const run of scheduleSpikes) {
      expect([run.label, run.status]).toEqual([run.label, 'ok']);
      expect(run.metrics.early).toBe(0);
      expect(run.metrics.started).toBe(200);
    }
    expect(report).toMatch(/## 3b\. A schedule spike/);
    // Single submits with a fresh caller's key each, through each system's own deduplication
    // option: every call still leaves one job (the raw-SQL reference takes no keys).
    const keyedSingles = runs.filter(
      (run) => run.workload === 'single-submit' && (run.params as { mode?: string }).mode === 'capacity-keyed',
    );
    expect(keyedSingles.map((run) => run.label)).toContain('docket (default)');
    expect(keyedSingles.map((run) => run.label)).not.toContain('raw-sql');
    for (const run of keyedSingles) expect([run.label, run.status]).toEqual([run.label, 'ok']);
    // Delayed single submits (the reminder case): each job due 500 ms after its call, through each
    // system's own run-time option; Docket starts every job once and none before its run time. The
    // raw-SQL reference takes no run time and is left out.
    const delayed = runs.filter((run) => run.workload === 'delayed');
    expect(delayed.map((run) => run.label)).toContain('docket (default)');
    expect(delayed.map((run) => run.label)).not.toContain('raw-sql');
    for (const run of delayed.filter((run) => run.label.startsWith('docket'))) {
      expect([run.label, run.status]).toEqual([run.label, 'ok']);
      expect(run.metrics.early).toBe(0);
      expect(run.metrics.started).toBe(200);
      expect(run.metrics.duplicates).toBe(0);
      expect(run.metrics.latenessP50Ms).toBeGreaterThanOrEqual(0);
    }
    expect(report).toMatch(/## 7d\. Delayed single submits/);
    // POST /v1/jobs to `docket serve` with its defaults, plain and keyed: every answer 201 and one
    // job stored per request; the bare node:http floor beside it.
    const served = runs.filter((run) => run.workload === 'http-submit' && run.label === 'docket serve');
    expect(served.map((run) => [(run.params as { mode?: string }).mode, run.status, run.metrics.jobsInStore])).toEqual([
      ['plain', 'ok', 300],
      ['keyed', 'ok', 300],
    ]);
    const floors = runs.filter((run) => run.workload === 'http-submit' && run.label.startsWith('http floor'));
    expect(floors.map((run) => run.status)).toEqual(['ok', 'ok']);
    expect(report).toMatch(/## 7c\. Single submits over HTTP/);
    // Remote HTTP workers of `docket serve` (its defaults), in a client process of their own: a
    // drain, a stream and a delayed stream per server, every job completed once.
    const phaseOf = (run: (typeof runs)[number]) => run.params as { phase?: string; jobs?: number };
    const remote = runs.filter((run) => run.workload === 'remote-workers' && run.label === 'docket serve');
    expect(remote.map((run) => [phaseOf(run).phase, run.status])).toEqual([
      ['drain', 'ok'],
      ['stream', 'ok'],
      ['delayed-stream', 'ok'],
    ]);
    for (const run of runs.filter((run) => run.workload === 'remote-workers' && run.label.startsWith('docket'))) {
      expect([run.label, run.status]).toEqual([run.label, 'ok']);
      expect(run.metrics.completed).toBe(phaseOf(run).jobs);
      expect(run.metrics.duplicates).toBe(0);
      expect(run.metrics.stale).toBe(0);
      expect(run.metrics.claimsPerJob).toBeGreaterThan(0);
    }
    expect(remote.find((run) => phaseOf(run).phase === 'stream')?.metrics.latenessP50Ms).toBeGreaterThanOrEqual(0);
    expect(report).toMatch(/## 7e\. Remote workers over HTTP/);
    // The single-submit latency run beside an idle worker process of the same system on another
    // queue (smoke: Docket's default configuration, on PostgreSQL and on SQLite): every job of the
    // stream started once, by the stream's worker, none by the neighbour; the raw-SQL reference is left out.
    const neighbours = runs.filter((run) => run.workload === 'neighbours');
    expect(neighbours.map((run) => run.label).sort()).toEqual(['docket (default)', 'docket-sqlite (default)']);
    for (const run of neighbours) {
      expect([run.label, run.status, run.problems]).toEqual([run.label, 'ok', []]);
      expect(run.params).toMatchObject({ neighbours: 1, jobs: 400 });
      expect(run.metrics.started).toBe(400);
      expect(run.metrics.latencyP50Ms).toBeGreaterThanOrEqual(0);
      // Measured (/proc), whatever its size: an idle neighbour may spend next to nothing.
      expect(Number.isFinite(run.metrics.neighbourCpuPercent)).toBe(true);
    }
    expect(report).toMatch(/## 7f\. Single submits beside neighbours/);
    // Every workload ran: none was left out for the smoke run's time budget.
    expect(runs.filter((run) => run.problems.some((problem) => problem.startsWith('time budget')))).toEqual([]);
  }, 330_000);

  it('drains a backlog and then, in the same worker process, a second one: both measured, every job once', async () => {
    const backlogDir = mkdtempSync(join(tmpdir(), 'docket-bench-backlog-'));
    try {
      const { code, output } = await runBench([
        '--smoke',
        '--only',
        'backlog',
        '--systems',
        'docket,raw-sql',
        '--backlog-jobs',
        '300',
        '--out',
        backlogDir,
      ]);
      expect(code, output.slice(-4000)).toBe(0);
      const { runs } = JSON.parse(readFileSync(join(backlogDir, 'results.json'), 'utf8')) as {
        runs: { workload: string; label: string; status: string; metrics: Record<string, number> }[];
      };
      const backlogs = runs.filter((run) => run.workload === 'backlog');
      expect(backlogs.map((run) => run.label).sort()).toEqual(['docket (default)', 'docket (tuned)', 'raw-sql']);
      for (const run of backlogs) {
        expect([run.label, run.status]).toEqual([run.label, 'ok']);
        // Each drain counted its own 300 jobs (the recorder fails a run on any job started twice).
        expect([run.label, run.metrics.started, run.metrics.secondStarted]).toEqual([run.label, 300, 300]);
        expect(run.metrics.secondJobsPerSec).toBeGreaterThan(0);
      }
      const report = readFileSync(join(backlogDir, 'RESULTS.md'), 'utf8');
      expect(report).toMatch(/The same worker process, draining a second backlog/);
      // Each system's second drain beside its first, and the second drains' ratios (an empty cell
      // where the table's second-÷-first column has nothing to say of a ratio).
      expect(report).toMatch(/\| raw-sql \| [\d,]+ \| \d+ % \|/);
      expect(report).toMatch(/\| docket \(tuned\) ÷ raw-sql \| \d+ % \| {2}\|/);
    } finally {
      rmSync(backlogDir, { recursive: true, force: true });
    }
  });

  it('runs the shard benchmark on 1 and 2 CPU-capped clusters, every job once, and writes its section', async () => {
    const shardDir = join(outDir, 'shards');
    const { code, output } = await runBench(['--shards', '--smoke', '--out', shardDir]);
    expect(code, output.slice(-4000)).toBe(0);
    expect(output).not.toMatch(/NOT OK/);
    const results = JSON.parse(readFileSync(join(shardDir, 'results', 'shards.json'), 'utf8')) as {
      capCheck: { cpuShare: number; cpuCores: number }[];
      drains: { shards: number; status: string; jobsPerShardSeen: number[] }[];
      spike: { status: string; metrics: { early: number } } | null;
    };
    // The cap holds: a spinning backend got no more than its quota (one period of rounding on top).
    for (const cap of results.capCheck) expect(cap.cpuShare).toBeLessThan(cap.cpuCores + 0.1);
    expect(results.drains.map((drain) => [drain.shards, drain.status])).toEqual([
      [1, 'ok'],
      [2, 'ok'],
    ]);
    // Keyless submits reached both shards of the two-shard run.
    const two = results.drains.find((drain) => drain.shards === 2);
    expect(two?.jobsPerShardSeen.every((n) => n > 0)).toBe(true);
    expect(results.spike?.status).toBe('ok');
    expect(results.spike?.metrics.early).toBe(0);
    expect(readFileSync(join(shardDir, 'RESULTS.md'), 'utf8')).toMatch(/## Shards: drain throughput/);
  }, 120_000);

  it('soaks for a few seconds with a short retention: every job once, pruning deletes finished rows', async () => {
    const soakDir = join(outDir, 'soak');
    const { code, output } = await runBench([
      '--soak',
      '--minutes',
      '0.1',
      '--rate',
      '200',
      '--retention-ms',
      '1500',
      '--prune-interval-ms',
      '2000',
      '--sample-seconds',
      '2',
      '--out',
      soakDir,
    ]);
    expect(code, output.slice(-4000)).toBe(0);
    const result = JSON.parse(readFileSync(join(soakDir, 'soak.json'), 'utf8')) as {
      totals: {
        offered: number;
        submitted: number;
        submitErrors: number;
        started: number;
        duplicates: number;
        strays: number;
      };
      samples: {
        afterOffer?: boolean;
        workerCpuUsPerJob: number;
        databaseCpuUsPerJob: number;
        hostBusyPct: number;
        hostStealPct: number;
        pendingIndexEntriesPerScan: number | null;
      }[];
      prunes: { deleted: number }[];
      statements: { query: string; calls: number }[] | null;
    };
    // 200/s for 6 s, open loop: slots still due when the time is up are not submitted.
    expect(result.totals.submitted).toBeGreaterThan(1_000);
    expect(result.totals.submitted + result.totals.submitErrors).toBe(result.totals.offered);
    expect(result.totals.submitErrors).toBe(0);
    expect(result.totals.started).toBe(result.totals.submitted);
    expect(result.totals.duplicates + result.totals.strays).toBe(0);
    expect(result.samples.length).toBeGreaterThanOrEqual(3);
    expect(result.prunes.some((prune) => prune.deleted > 0)).toBe(true);
    // Where each window's time went is measured, not left blank: a worker and a database that
    // started jobs spent CPU on them, and the host's busy share is a share. (Entries per scan may be
    // null in JSON, NaN, when the statistics of a 2-second window were not yet published.)
    const loaded = result.samples.filter((s) => !s.afterOffer);
    expect(loaded.length).toBeGreaterThanOrEqual(2);
    for (const s of loaded) {
      expect(s.workerCpuUsPerJob).toBeGreaterThan(0);
      expect(s.databaseCpuUsPerJob).toBeGreaterThan(0);
      expect(s.hostBusyPct).toBeGreaterThan(0);
      expect(s.hostBusyPct).toBeLessThanOrEqual(100);
      expect(s.hostStealPct).toBeGreaterThanOrEqual(0);
    }
    expect(loaded.some((s) => (s.pendingIndexEntriesPerScan ?? -1) >= 0)).toBe(true);
    const report = readFileSync(join(soakDir, 'SOAK.md'), 'utf8');
    expect(report).toMatch(/Flatness/);
    expect(report).toMatch(/\| database CPU per job \| [\d.,]+ µs \|/);
    // The database's time by statement is read where the server loads pg_stat_statements (this
    // machine's main cluster does not), and the report says which.
    if (result.statements === null) expect(report).toMatch(/time by statement: not read/);
    else {
      expect(result.statements.some((st) => /claim_pending/.test(st.query) && st.calls > 0)).toBe(true);
      expect(report).toMatch(/time by statement over the whole soak/);
    }
  }, 120_000);
});
