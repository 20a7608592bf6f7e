/**
 * Turns the raw results into RESULTS.md (machine, versions, configurations, tables of medians over
 * rounds, Docket-to-peer ratios, targets met or missed, profiles), the raw JSON beside it, and SVG
 * charts in `results/`.
 */

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProfileSummary } from './cpu-profile.js';
import { TARGET_MS as DASHBOARD_TARGET_MS, type DashboardTiming, dashboardTable } from './dashboard-queries.js';
import type { PgbenchResult } from './pgbench-limit.js';
import { pgbenchSqlForReport } from './pgbench-limit.js';
import { existingShardSection } from './shard-section.js';
import { median, round } from './stats.js';
import { cdfChart, spikeChart } from './svg-charts.js';
import { NEIGHBOUR_QUEUE } from './systems/system.js';
import { type RunRecord, SPIKE_BINS } from './workloads.js';

/** The claim's plan as captured by auto_explain. */
export interface ExplainCapture {
  label: string;
  plans: string[];
  note: string;
  seqScanOnJobs?: boolean;
}

/** Everything one benchmark invocation produced (the raw JSON). */
export interface BenchResults {
  mode: 'smoke' | 'full';
  startedAt: string;
  finishedAt: string;
  command: string;
  machine: {
    cpu: string;
    memoryGb: number;
    os: string;
    node: string;
    postgres: string;
    redis: string;
    sqlite: string;
    versions: Record<string, string>;
    dbClockOffsetMs: number;
    dbClockErrorBoundMs: number;
    /** Server settings that change what a drain over dead rows costs (autovacuum above all). */
    postgresSettings?: Record<string, string>;
  };
  options: Record<string, unknown>;
  configs: { label: string; system: string; variant: string; config: string }[];
  unavailable: Record<string, string>;
  runs: RunRecord[];
  pgbench: PgbenchResult[];
  explain: ExplainCapture[];
  profiles: ProfileSummary[];
  profileRun?: { jobsPerSec: number; status: string };
  /** pg_stat_activity samples during the profiled drain: wait event + query → count. */
  waits: Record<string, number>;
  /** The dashboard's API calls at 1M pending + 1M finished rows (bench/dashboard-queries.ts). */
  dashboard?: DashboardTiming[];
}

type Params = RunRecord['params'];

function sameParams(a: Params, b: Params): boolean {
  return Object.keys(b).every((key) => a[key] === b[key]);
}

function runsOf(bench: BenchResults, workload: string, label: string, params: Params): RunRecord[] {
  return bench.runs.filter((run) => run.workload === workload && run.label === label && sameParams(run.params, params));
}

/** Median of a metric over a cell's ok runs, with how many rounds counted and what went wrong. */
interface Cell {
  value: number;
  ok: number;
  total: number;
  statuses: string[];
}

function cell(runs: RunRecord[], metric: string | ((run: RunRecord) => number)): Cell {
  const ok = runs.filter((run) => run.status === 'ok');
  const pick = typeof metric === 'string' ? (run: RunRecord) => run.metrics[metric] ?? Number.NaN : metric;
  const counted = runs.filter((run) => run.status !== 'skipped');
  return {
    value: median(ok.map(pick)),
    ok: ok.length,
    total: counted.length,
    statuses: [...new Set(runs.filter((run) => run.status !== 'ok').map((run) => run.status))],
  };
}

function fmt(value: number, unit = ''): string {
  if (!Number.isFinite(value)) return '—';
  return `${round(value).toLocaleString('en-US')}${unit}`;
}

function show(c: Cell, unit = ''): string {
  if (c.total === 0) return c.statuses.includes('skipped') ? 'skipped' : '—';
  const base = c.ok > 0 ? fmt(c.value, unit) : '**no valid run**';
  const flags = c.statuses.filter((s) => s !== 'skipped');
  const rounds = c.ok === c.total ? '' : ` (${c.ok}/${c.total} ok${flags.length ? `: ${flags.join(', ')}` : ''})`;
  return `${base}${rounds}`;
}

function table(header: string[], rows: string[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ].join('\n');
}

function labels(bench: BenchResults, workload: string): string[] {
  return [...new Set(bench.runs.filter((run) => run.workload === workload).map((run) => run.label))];
}

function paramSets(bench: BenchResults, workload: string, keys: string[]): Params[] {
  const seen = new Map<string, Params>();
  for (const run of bench.runs.filter((r) => r.workload === workload)) {
    const params = Object.fromEntries(keys.map((key) => [key, run.params[key]!]));
    seen.set(JSON.stringify(params), params);
  }
  return [...seen.values()];
}

/** The raw-SQL reference drain's label (bench/systems/raw-sql.ts). */
const RAW_SQL = 'raw-sql';
/**
 * Docket keeping no done records (`retentionMs: 0`), default worker: bench/systems/docket.ts. Its
 * default worker is its fastest (two claims in flight, the database no longer the bound; decision 0022).
 */
const LEAN = 'docket-lean (default)';

/** Docket on PostgreSQL, in any configuration (not `docket-sqlite`). */
function isDocket(label: string): boolean {
  return label === 'docket' || label.startsWith('docket (') || label.startsWith('docket-lean');
}

/**
 * The Docket configuration the targets and ratios are judged on: the tuned one (prefetch 500,
 * graphile-worker's published local-queue size) when it ran, else the default. The tables show both.
 */
let DOCKET = 'docket (tuned)';
function chooseDocketLabel(bench: BenchResults): void {
  const labels = new Set(bench.runs.map((run) => run.label));
  DOCKET = ['docket (tuned)', 'docket (default)', 'docket'].find((l) => labels.has(l)) ?? 'docket (tuned)';
}

/** A target line: met, missed, or not measured. */
interface Target {
  name: string;
  met: boolean | null;
  detail: string;
}

function check(name: string, met: boolean | null, detail: string): Target {
  return { name, met, detail };
}

function drainSection(bench: BenchResults, targets: Target[]): string[] {
  const out: string[] = [];
  const sets = paramSets(bench, 'drain', ['jobs', 'procs']);
  const pgLabels = labels(bench, 'drain').filter((label) => !isSqliteLabel(label));
  if (sets.length === 0 || pgLabels.length === 0) return out;
  out.push('## 1. Drain', '');
  out.push(
    'Jobs already inserted; worker processes started together; jobs/s from the first handler start until the store holds no due, unfinished job. Median over rounds; peak RSS is the largest worker process.',
    '',
  );
  const header = ['system', ...sets.flatMap((p) => [`${p.jobs} jobs × ${p.procs} proc jobs/s`, 'peak RSS MiB'])];
  const rows = pgLabels.map((label) => [
    label,
    ...sets.flatMap((p) => {
      const runs = runsOf(bench, 'drain', label, p);
      return [show(cell(runs, 'jobsPerSec')), show(cell(runs, 'peakRssMb'))];
    }),
  ]);
  out.push(table(header, rows), '');
  if (pgLabels.includes(RAW_SQL))
    out.push(
      `${RAW_SQL} is the reference, not a scheduler: a worker written with \`pg\` straight against Docket's own tables (claim 500 due rows with FOR UPDATE SKIP LOCKED, run ${String(bench.options.concurrency)} at once, finish in batches with a fenced update on id, token and owner; bench/systems/raw-sql.ts). Docket ÷ ${RAW_SQL} is the share of the database's reachable drain speed Docket keeps.`,
      '',
    );
  if (pgLabels.includes(DOCKET)) {
    out.push(`${DOCKET} ÷ peer (drain jobs/s; above 1 means Docket is faster):`, '');
    const peers = pgLabels.filter((label) => !isDocket(label));
    const ratioRows = peers.map((peer) => [
      peer,
      ...sets.map((p) => {
        const d = cell(runsOf(bench, 'drain', DOCKET, p), 'jobsPerSec').value;
        const q = cell(runsOf(bench, 'drain', peer, p), 'jobsPerSec').value;
        return Number.isFinite(d) && Number.isFinite(q) && q > 0 ? `${round(d / q)}×` : '—';
      }),
    ]);
    out.push(table(['peer', ...sets.map((p) => `${p.jobs} × ${p.procs}`)], ratioRows), '');
    for (const p of sets) {
      const d = cell(runsOf(bench, 'drain', DOCKET, p), 'jobsPerSec').value;
      const gw = cell(runsOf(bench, 'drain', 'graphile-worker (tuned)', p), 'jobsPerSec').value;
      const bull = Math.max(
        ...['bullmq (default)', 'bullmq (tuned)']
          .map((l) => cell(runsOf(bench, 'drain', l, p), 'jobsPerSec').value)
          .filter(Number.isFinite),
      );
      const where = `${p.jobs} jobs, ${p.procs} proc`;
      targets.push(
        check(
          `Drain ≥ 1.5× graphile-worker tuned (${where})`,
          Number.isFinite(d) && Number.isFinite(gw) ? d >= 1.5 * gw : null,
          `Docket ${fmt(d)}/s vs ${fmt(gw)}/s = ${Number.isFinite(d / gw) ? round(d / gw) : '—'}×`,
        ),
        check(
          `Drain ≥ 4× BullMQ, best variant (${where})`,
          Number.isFinite(d) && Number.isFinite(bull) ? d >= 4 * bull : null,
          `Docket ${fmt(d)}/s vs ${fmt(bull)}/s = ${Number.isFinite(d / bull) ? round(d / bull) : '—'}×`,
        ),
      );
      const raw = cell(runsOf(bench, 'drain', RAW_SQL, p), 'jobsPerSec').value;
      if (pgLabels.includes(RAW_SQL))
        targets.push(
          check(
            `Drain ≥ 60 % of the raw-SQL reference (${where})`,
            Number.isFinite(d) && Number.isFinite(raw) ? d >= 0.6 * raw : null,
            `Docket ${fmt(d)}/s vs ${fmt(raw)}/s = ${Number.isFinite(d / raw) ? `${Math.round((100 * d) / raw)} %` : '—'}`,
          ),
        );
    }
    const big = sets.find((p) => p.jobs === Math.max(...sets.map((s) => Number(s.jobs))));
    if (big) {
      const rss = pgLabels.map(
        (label) => `${label} ${show(cell(runsOf(bench, 'drain', label, big), 'peakRssMb'), ' MiB')}`,
      );
      targets.push(
        check(`Peak RSS during the ${big.jobs}-job drain, every system (${big.procs} proc)`, null, rss.join('; ')),
      );
    }
  }
  return out;
}

/** A drain cell that still shows the rate a timed-out run reached (a cliff is the point here). */
function showDrain(runs: RunRecord[]): string {
  const c = cell(runs, 'jobsPerSec');
  if (c.ok > 0 || c.total === 0) return show(c);
  const timedOut = runs.filter((run) => run.status === 'timeout');
  if (timedOut.length === 0) return show(c);
  const rate = median(timedOut.map((run) => run.metrics.jobsPerSec ?? Number.NaN));
  return `timeout (${fmt(rate)}/s reached, ${timedOut.length}/${c.total})`;
}

function ratioText(a: number, b: number, percent = false): string {
  if (!(Number.isFinite(a) && Number.isFinite(b) && b > 0)) return '—';
  return percent ? `${Math.round((100 * a) / b)} %` : `${round(a / b)}×`;
}

/** A backfill into a worker already running (workloads.ts backfillRun; decision 0023). */
function backfillSection(bench: BenchResults): string[] {
  const sets = paramSets(bench, 'backfill', ['jobs', 'warm', 'analyzed']);
  const names = labels(bench, 'backfill');
  if (sets.length === 0) return [];
  const out = [
    '## 1c. A backfill into a running worker',
    '',
    'One worker process started on an empty store ran the first ' +
      `${Number(sets[0]!.warm).toLocaleString('en-US')} jobs (a fresh install's first traffic; between their halves the database was ` +
      "analysed, as autovacuum analyses a new table after its first changes, unless the column says not), and then the backfill was inserted through the system's batch API while that worker ran. " +
      "Jobs/s from the first backfill job's start until nothing is due. Beside section 1b's drains, where the worker starts after the insert, this shows whether a worker whose plans were made on a small table keeps its pace.",
    '',
    table(
      [
        'system',
        ...sets.map(
          (p) => `${Number(p.jobs).toLocaleString('en-US')} jobs/s${p.analyzed === 'no' ? ' (not analysed)' : ''}`,
        ),
      ],
      names.map((label) => [label, ...sets.map((p) => showDrain(runsOf(bench, 'backfill', label, p)))]),
    ),
    '',
  ];
  const rate = (workload: string, label: string, params: Params) =>
    cell(runsOf(bench, workload, label, params), 'jobsPerSec').value;
  // [row, numerator, divisor, as a percentage, the divisor's workload]
  const ratios: [string, string, string, boolean, 'backfill' | 'backlog'][] = [
    [
      'docket (default) ÷ graphile-worker (default)',
      'docket (default)',
      'graphile-worker (default)',
      false,
      'backfill',
    ],
    ['docket (tuned) ÷ graphile-worker (tuned)', 'docket (tuned)', 'graphile-worker (tuned)', false, 'backfill'],
    ['docket (default) ÷ docket (tuned)', 'docket (default)', 'docket (tuned)', true, 'backfill'],
    [
      'docket (default): running worker ÷ worker started after the insert (1b)',
      'docket (default)',
      'docket (default)',
      true,
      'backlog',
    ],
  ];
  const rows: string[][] = [];
  for (const p of sets) {
    for (const [name, numerator, divisor, percent, divisorWorkload] of ratios) {
      const a = rate('backfill', numerator, p);
      const b = rate(divisorWorkload, divisor, divisorWorkload === 'backlog' ? { jobs: Number(p.jobs), procs: 1 } : p);
      if (!Number.isFinite(a) || !Number.isFinite(b)) continue;
      const size = `${Number(p.jobs).toLocaleString('en-US')} jobs${p.analyzed === 'no' ? ' (not analysed)' : ''}`;
      rows.push([name, size, ratioText(a, b, percent)]);
    }
  }
  if (rows.length > 0) out.push(table(['ratio', 'backfill', 'value'], rows), '');
  return out;
}

function outageSection(bench: BenchResults): string[] {
  const sets = paramSets(bench, 'outage', ['jobs', 'procs']);
  const names = labels(bench, 'outage');
  if (sets.length === 0) return [];
  const out = [
    '## 1d. A downstream outage',
    '',
    "The backlog queued, then one worker process started, and every job's first attempt threw (a downstream answering 503; the retry an hour away). " +
      'Jobs/s from the first start until nothing is due: every failed attempt recorded, its job pending again. ' +
      "Docket's drivers only. Beside the drain of the same backlog (1b), it shows what a failed attempt costs over a successful one (decision 0024).",
    '',
    table(
      ['system', ...sets.map((p) => `${Number(p.jobs).toLocaleString('en-US')} jobs/s`)],
      names.map((label) => [label, ...sets.map((p) => showDrain(runsOf(bench, 'outage', label, p)))]),
    ),
    '',
  ];
  const rows: string[][] = [];
  for (const p of sets) {
    for (const label of names) {
      const outage = cell(runsOf(bench, 'outage', label, p), 'jobsPerSec').value;
      const drain = cell(runsOf(bench, 'backlog', label, p), 'jobsPerSec').value;
      if (!Number.isFinite(outage) || !Number.isFinite(drain)) continue;
      rows.push([
        `${label}: outage ÷ drain (1b)`,
        `${Number(p.jobs).toLocaleString('en-US')} jobs`,
        ratioText(outage, drain, true),
      ]);
    }
  }
  if (rows.length > 0) out.push(table(['ratio', 'backlog', 'value'], rows), '');
  return out;
}

/** A backlog over many job kinds, a handler each (workloads.ts drainRun with `kinds`; decision 0026). */
function kindsSection(bench: BenchResults): string[] {
  const sets = paramSets(bench, 'kinds', ['jobs', 'procs', 'kinds']);
  const names = labels(bench, 'kinds');
  if (sets.length === 0) return [];
  const heading = (p: Params) =>
    `${Number(p.kinds).toLocaleString('en-US')} kinds, ${Number(p.jobs).toLocaleString('en-US')} jobs/s`;
  const out = [
    '## 1e. A backlog over many job kinds',
    '',
    'The backlog queued round-robin over K job kinds, then one worker process started that handles every kind (one handler each, as a service registers one per job type): ' +
      "Docket's kinds (on PostgreSQL and on SQLite), graphile-worker's task identifiers, BullMQ's job names in one queue. pg-boss routes job types by queue (a polling loop each) and does not run it. " +
      'Jobs/s from the first start until nothing is due. Beside the one-kind drain of the same backlog (1b, when it ran), it shows what the kinds cost.',
    '',
    table(
      ['system', ...sets.map(heading)],
      names.map((label) => [label, ...sets.map((p) => showDrain(runsOf(bench, 'kinds', label, p)))]),
    ),
    '',
  ];
  const rate = (workload: string, label: string, p: Params) =>
    cell(runsOf(bench, workload, label, p), 'jobsPerSec').value;
  const rows: string[][] = [];
  for (const label of names.filter(isDocket)) {
    const variant = /\((default|tuned)\)$/.exec(label)?.[1];
    for (const peer of ['graphile-worker', 'graphile-worker-latest', 'bullmq', 'bullmq-latest']) {
      const divisor = `${peer} (${variant})`;
      if (!names.includes(divisor)) continue;
      rows.push([
        `${label} ÷ ${divisor}`,
        ...sets.map((p) => ratioText(rate('kinds', label, p), rate('kinds', divisor, p))),
      ]);
    }
  }
  for (const label of names) {
    const ratios = sets.map((p) =>
      ratioText(rate('kinds', label, p), rate('backlog', label, { jobs: p.jobs!, procs: 1 }), true),
    );
    if (ratios.some((text) => text !== '—')) rows.push([`${label}: K kinds ÷ one kind (1b)`, ...ratios]);
  }
  if (rows.length > 0)
    out.push(
      table(['ratio (medians)', ...sets.map((p) => `${Number(p.kinds).toLocaleString('en-US')} kinds`)], rows),
      '',
    );
  return out;
}

/**
 * The backlog runs' second drain (workloads.ts secondDrain): the same worker process, its code
 * compiled by its first drain, meets a second backlog of the size. Informational: the targets are
 * judged on the first drain, which a freshly deployed worker meets.
 */
function secondDrainTable(bench: BenchResults, sets: Params[], names: string[]): string[] {
  const second = (label: string, p: Params) => cell(runsOf(bench, 'backlog', label, p), 'secondJobsPerSec');
  const measured = sets.filter((p) => names.some((label) => second(label, p).ok > 0));
  if (measured.length === 0) return [];
  const rate = (label: string, p: Params) => second(label, p).value;
  const first = (label: string, p: Params) => cell(runsOf(bench, 'backlog', label, p), 'jobsPerSec').value;
  const rows: string[][] = names.map((label) => [
    label,
    ...measured.flatMap((p) => [show(second(label, p)), ratioText(rate(label, p), first(label, p), true)]),
  ]);
  const ratios: [string, string, boolean][] = [
    ['docket (default)', 'docket (tuned)', true],
    ['docket (default)', 'graphile-worker (default)', false],
    ['docket (tuned)', 'graphile-worker (tuned)', false],
    ['docket (default)', 'graphile-worker-latest (default)', false],
    ['docket (tuned)', 'graphile-worker-latest (tuned)', false],
    [LEAN, 'graphile-worker (tuned)', false],
    [LEAN, 'graphile-worker-latest (tuned)', false],
    ['docket (tuned)', RAW_SQL, true],
  ];
  for (const [a, b, percent] of ratios) {
    if (!names.includes(a) || !names.includes(b)) continue;
    rows.push([`${a} ÷ ${b}`, ...measured.flatMap((p) => [ratioText(rate(a, p), rate(b, p), percent), ''])]);
  }
  return [
    '**The same worker process, draining a second backlog.** Once its first backlog was drained, each run inserted a second one of the same size while its worker process idled, all due at one instant after the last insert. ' +
      "A worker that has drained once has its hot code compiled by V8's JIT, as a long-running worker has when a backfill arrives; the first drain above includes that compiling (bench/warm-up.ts measures it). " +
      "The second backlog also meets what the first left in the table: its finished records (Docket's by default) or dead rows (a deleting system's), and the dead index entries of both, until a VACUUM; whether one runs in between is the database's autovacuum setting. " +
      'Medians of the second drains, each beside its first; then the ratios of the second drains. Informational: the targets are judged on the first drain, which a freshly deployed worker meets on a fresh table.',
    '',
    table(
      [
        'system',
        ...measured.flatMap((p) => [
          `${Number(p.jobs).toLocaleString('en-US')}: second drain, jobs/s`,
          'second ÷ first',
        ]),
      ],
      rows,
    ),
    '',
  ];
}

function backlogSection(bench: BenchResults, targets: Target[]): string[] {
  const sets = paramSets(bench, 'backlog', ['jobs', 'procs']);
  const names = labels(bench, 'backlog');
  if (sets.length === 0) return [];
  const out = ['## 1b. Backlog drains: default configuration against tuned', ''];
  out.push(
    "A backlog queued before any worker runs (each size inserted through the system's batch API, then one worker process started), as a user's backfill meets a default worker. Jobs/s from the first handler start until nothing is due; a run that did not finish within its cap shows the rate it reached. When more than one size runs, the largest runs Docket and the raw-SQL reference only.",
    '',
  );
  out.push(
    table(
      ['system', ...sets.map((p) => `${Number(p.jobs).toLocaleString('en-US')} jobs/s`)],
      names.map((label) => [label, ...sets.map((p) => showDrain(runsOf(bench, 'backlog', label, p)))]),
    ),
    '',
  );
  // A cell's median over ok runs; when every counted run timed out, the rate it reached, flagged:
  // the true rate was lower still (the drain had not finished and was not speeding up).
  const rate = (label: string, p: Params): { value: number; timedOut: boolean } => {
    const runs = runsOf(bench, 'backlog', label, p);
    const c = cell(runs, 'jobsPerSec');
    if (c.ok > 0 || c.total === 0) return { value: c.value, timedOut: false };
    const timedOut = runs.filter((run) => run.status === 'timeout');
    return {
      value: median(timedOut.map((run) => run.metrics.jobsPerSec ?? Number.NaN)),
      timedOut: timedOut.length > 0,
    };
  };
  const bounded = (
    a: { value: number; timedOut: boolean },
    b: { value: number; timedOut: boolean },
    percent: boolean,
  ) => {
    const text = ratioText(a.value, b.value, percent);
    if (text === '—' || (!a.timedOut && !b.timedOut)) return text;
    if (a.timedOut && b.timedOut) return `~${text} (both timed out)`;
    return a.timedOut ? `< ${text} (timed out)` : `> ${text} (divisor timed out)`;
  };
  const ratios: [string, string, string, boolean][] = [
    ['docket (default) ÷ docket (tuned)', 'docket (default)', 'docket (tuned)', true],
    ['docket (default) ÷ graphile-worker (default)', 'docket (default)', 'graphile-worker (default)', false],
    ['docket (tuned) ÷ graphile-worker (tuned)', 'docket (tuned)', 'graphile-worker (tuned)', false],
    // graphile-worker's latest release on Node 24: rows only when --peers-latest measured it.
    ...(['default', 'tuned'] as const)
      .map((variant): [string, string, string, boolean] => [
        `docket (${variant}) ÷ graphile-worker-latest (${variant})`,
        `docket (${variant})`,
        `graphile-worker-latest (${variant})`,
        false,
      ])
      .filter(([, , divisor]) => sets.some((p) => Number.isFinite(rate(divisor, p).value))),
    [`docket (tuned) ÷ ${RAW_SQL}`, 'docket (tuned)', RAW_SQL, true],
    [`docket (default) ÷ ${RAW_SQL}`, 'docket (default)', RAW_SQL, true],
    // retentionMs 0 (decision 0022): rows only when docket-lean ran.
    ...(
      [
        [`${LEAN} ÷ docket (default)`, LEAN, 'docket (default)', true],
        [`${LEAN} ÷ graphile-worker (tuned)`, LEAN, 'graphile-worker (tuned)', false],
        [`${LEAN} ÷ graphile-worker-latest (tuned)`, LEAN, 'graphile-worker-latest (tuned)', false],
      ] as [string, string, string, boolean][]
    ).filter(([, a, b]) => sets.some((p) => Number.isFinite(rate(a, p).value) && Number.isFinite(rate(b, p).value))),
  ];
  out.push(
    table(
      ['ratio (medians)', ...sets.map((p) => `${Number(p.jobs).toLocaleString('en-US')}`)],
      ratios.map(([name, a, b, percent]) => [name, ...sets.map((p) => bounded(rate(a, p), rate(b, p), percent))]),
    ),
    '',
  );
  out.push(...secondDrainTable(bench, sets, names));
  /** At least `factor` × the divisor? A timed-out numerator can only miss; a timed-out divisor only meet. */
  const atLeast = (
    a: { value: number; timedOut: boolean },
    b: { value: number; timedOut: boolean },
    factor: number,
  ) => {
    if (!Number.isFinite(a.value) || !Number.isFinite(b.value)) return null;
    const meets = a.value >= factor * b.value;
    if (a.timedOut && b.timedOut) return null;
    if (a.timedOut) return meets ? null : false;
    if (b.timedOut) return meets ? true : null;
    return meets;
  };
  for (const p of sets) {
    const where = `${Number(p.jobs).toLocaleString('en-US')}-job backlog`;
    const d = rate('docket (default)', p);
    const t = rate('docket (tuned)', p);
    const gwd = rate('graphile-worker (default)', p);
    const gwt = rate('graphile-worker (tuned)', p);
    const raw = rate(RAW_SQL, p);
    const shown = (x: { value: number; timedOut: boolean }) => `${fmt(x.value)}/s${x.timedOut ? ' (timed out)' : ''}`;
    targets.push(
      check(
        `Default drain ≥ 90 % of tuned (${where})`,
        atLeast(d, t, 0.9),
        `${shown(d)} vs ${shown(t)} = ${bounded(d, t, true)}`,
      ),
    );
    if (names.includes('graphile-worker (default)'))
      targets.push(
        check(
          `Default drain ≥ 10× graphile-worker default (${where})`,
          atLeast(d, gwd, 10),
          `${shown(d)} vs ${shown(gwd)} = ${bounded(d, gwd, false)}`,
        ),
      );
    const factor = Number(p.jobs) >= 100_000 ? 2 : 1.5;
    if (names.includes('graphile-worker (tuned)'))
      targets.push(
        check(
          `Tuned drain ≥ ${factor}× graphile-worker tuned (${where})`,
          atLeast(t, gwt, factor),
          `${shown(t)} vs ${shown(gwt)} = ${bounded(t, gwt, false)}`,
        ),
      );
    if (names.includes(LEAN) && names.includes('graphile-worker (tuned)')) {
      const lean = rate(LEAN, p);
      targets.push(
        check(
          `Drain keeping no done records (retentionMs 0, as graphile-worker keeps none; default worker) ≥ ${factor}× graphile-worker tuned (${where})`,
          atLeast(lean, gwt, factor),
          `${shown(lean)} vs ${shown(gwt)} = ${bounded(lean, gwt, false)}`,
        ),
      );
    }
    if (names.includes(RAW_SQL))
      targets.push(
        check(
          `Tuned drain ≥ 60 % of the raw-SQL reference (${where})`,
          atLeast(t, raw, 0.6),
          `${shown(t)} vs ${shown(raw)} = ${bounded(t, raw, true)}`,
        ),
      );
  }
  return out;
}

function streamSection(
  bench: BenchResults,
  outDir: string,
  charts: string[],
  targets: Target[],
  workload = 'stream',
  title = '## 2. Steady stream',
): string[] {
  const out: string[] = [];
  const sets = paramSets(bench, workload, ['ratePerSec']);
  const all = labels(bench, workload);
  if (sets.length === 0) return out;
  out.push(title, '');
  out.push(
    'Immediate jobs submitted at a fixed rate (each due batch in one insert call, one call in flight) while one worker process runs. Start latency = handler start − start of the insert call carrying the job, in ms. "backlog" = the last tenth of jobs waited over 3× (and 50 ms more than) the first tenth. Medians over rounds.',
    '',
  );
  for (const p of sets) {
    const rows = all.map((label) => {
      const runs = runsOf(bench, workload, label, p);
      return [
        label,
        show(cell(runs, 'latencyP50Ms')),
        show(cell(runs, 'latencyP99Ms')),
        show(cell(runs, 'latencyMaxMs')),
        show(cell(runs, 'meanBatch')),
        runs.some((run) => run.metrics.backlogGrew === 1)
          ? '**grew**'
          : runs.some((run) => run.status === 'ok')
            ? 'flat'
            : '—',
      ];
    });
    out.push(
      `### ${p.ratePerSec} jobs/s`,
      '',
      table(['system', 'p50 ms', 'p99 ms', 'max ms', 'jobs per insert', 'backlog'], rows),
      '',
    );
    const series = all
      .map((label) => ({
        label,
        points: runsOf(bench, workload, label, p).find((run) => run.latencyCdf)?.latencyCdf ?? [],
      }))
      .filter((s) => s.points.length > 0);
    if (series.length > 0) {
      const name = `${workload}-${p.ratePerSec}-cdf.svg`;
      writeFileSync(
        join(outDir, 'results', name),
        cdfChart(`Start latency at ${p.ratePerSec} jobs/s (first round)`, 'ms', series),
      );
      charts.push(name);
      out.push(`![start latency CDF at ${p.ratePerSec}/s](results/${name})`, '');
    }
    if (workload === 'stream' && all.includes(DOCKET)) {
      const runs = runsOf(bench, 'stream', DOCKET, p);
      if (p.ratePerSec === 1000) {
        const p99 = cell(runs, 'latencyP99Ms').value;
        targets.push(
          check('Stream at 1,000/s: p99 ≤ 10 ms', Number.isFinite(p99) ? p99 <= 10 : null, `p99 ${fmt(p99)} ms`),
        );
      }
      if (p.ratePerSec === 5000) {
        const grew = runs.some((run) => run.metrics.backlogGrew === 1);
        const ok = runs.some((run) => run.status === 'ok');
        targets.push(
          check(
            'Stream at 5,000/s: no growing backlog',
            ok ? !grew && runs.every((run) => run.status === 'ok') : null,
            `first-tenth p50 ${fmt(cell(runs, 'firstTenthP50Ms').value)} ms, last-tenth p50 ${fmt(cell(runs, 'lastTenthP50Ms').value)} ms`,
          ),
        );
      }
    }
  }
  return out;
}

/** One system's spike runs: the median last start after the due instant, and early starts over all rounds. */
function spikeOutcome(bench: BenchResults, label: string, p: Params, workload = 'spike') {
  const runs = runsOf(bench, workload, label, p);
  const early = runs.reduce((sum, run) => sum + (run.metrics.early ?? 0), 0);
  return { runs, early, last: cell(runs, 'lastStartAfterDueMs').value };
}

/** 2nd, 3rd, 4th …: the spike a worker meets after others. */
function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/** The schedule spike: the runs of recurring schedules all due at one instant (Docket only). */
function scheduleSpikeSection(bench: BenchResults): string[] {
  const all = labels(bench, 'schedule-spike');
  if (all.length === 0) return [];
  const p = paramSets(bench, 'schedule-spike', ['jobs', 'leadMs', 'spikes'])[0]!;
  const spikes = Number(p.spikes ?? 1);
  const out = [
    '## 3b. A schedule spike',
    '',
    `${p.jobs} recurring schedules, each due at the same whole second about ${p.leadMs} ms ahead and next a year later (as when every tenant's nightly report falls due at 00:00), created one \`schedule()\` call each (16 in flight) while one worker process idles. Each run's claim also plans its schedule's next run in the same transaction. Lateness as in section 3; ${spikes} spike(s) per worker process, each with ${p.jobs} new schedules; the last columns are the ${ordinal(spikes)} spike's. Docket only (SCHEDULE_SYSTEMS): the peers have no comparable one-schedule-per-tenant call.`,
    '',
  ];
  const rows = all.map((label) => {
    const { runs, early } = spikeOutcome(bench, label, p, 'schedule-spike');
    return [
      label,
      show(cell(runs, 'insertMs')),
      show(cell(runs, 'latenessP50Ms')),
      show(cell(runs, 'lastStartAfterDueMs')),
      ...(spikes > 1 ? [show(cell(runs, 'warmLatenessP50Ms')), show(cell(runs, 'warmLatenessMaxMs'))] : []),
      String(early),
    ];
  });
  const warmHeaders =
    spikes > 1 ? [`${ordinal(spikes)} spike: p50 ms`, `${ordinal(spikes)} spike: last start, ms`] : [];
  out.push(
    table(
      ['system', 'creating the schedules, ms', 'lateness p50 ms', 'last start after due, ms', ...warmHeaders, 'early'],
      rows,
    ),
    '',
  );
  return out;
}

function spikeSection(bench: BenchResults, outDir: string, charts: string[], targets: Target[]): string[] {
  const all = labels(bench, 'spike');
  if (all.length === 0) return [];
  const p = paramSets(bench, 'spike', ['jobs', 'leadMs', 'spikes'])[0]!;
  const out = ['## 3. The spike', ''];
  out.push(
    `${p.jobs} jobs due at one instant ${p.leadMs} ms ahead (by the database clock, read just before inserting), inserted while one worker process idles. Lateness = handler start (its worker's \`Date.now()\`, whole ms) − due instant, ms. "early" counts starts whose \`Date.now()\` was below the due instant: the database and the workers share this host's clock (measured offset ${fmt(bench.machine.dbClockOffsetMs)} ms ± ${fmt(bench.machine.dbClockErrorBoundMs)} ms), so this is the database clock too. Medians over rounds; early is the total over rounds.`,
    '',
  );
  // Runs from before repeated spikes have no `spikes` parameter: one spike per worker.
  const spikes = Number(p.spikes ?? 1);
  if (spikes > 1)
    out.push(
      `Each worker process takes ${spikes} spikes in a row, each due ${p.leadMs} ms after the one before finished. The lateness columns are the first spike's, met by a worker just started (its code not yet compiled by the JIT, as right after a deploy); the last two columns are the ${ordinal(spikes)} spike's, met by the same worker after ${spikes - 1} (as in production, where a worker has usually been running for a while). The target is judged on the first. Early starts are counted over all spikes.`,
      '',
    );
  const rows = all.map((label) => {
    const { runs, early } = spikeOutcome(bench, label, p);
    return [
      label,
      show(cell(runs, 'latenessP50Ms')),
      show(cell(runs, 'latenessP99Ms')),
      show(cell(runs, 'latenessMaxMs')),
      show(cell(runs, 'lastStartAfterDueMs')),
      ...(spikes > 1 ? [show(cell(runs, 'warmLatenessP99Ms')), show(cell(runs, 'warmLatenessMaxMs'))] : []),
      String(early),
    ];
  });
  const warmHeaders =
    spikes > 1 ? [`${ordinal(spikes)} spike: p99 ms`, `${ordinal(spikes)} spike: last start, ms`] : [];
  out.push(
    table(['system', 'lateness p50 ms', 'p99 ms', 'max ms', 'last start after due, ms', ...warmHeaders, 'early'], rows),
    '',
  );
  const series = all
    .map((label) => ({
      label,
      counts: runsOf(bench, 'spike', label, p).find((run) => run.spikeHistogram)?.spikeHistogram ?? [],
    }))
    .filter((s) => s.counts.length > 0);
  if (series.length > 0) {
    // Trim the empty tail so fast systems are not squeezed into the left edge.
    let lastBin = 20;
    for (const s of series)
      s.counts.forEach((count, k) => {
        if (count > 0) lastBin = Math.max(lastBin, k + 1);
      });
    const width = (SPIKE_BINS.toMs - SPIKE_BINS.fromMs) / SPIKE_BINS.bins;
    const name = 'spike-histogram.svg';
    writeFileSync(
      join(outDir, 'results', name),
      spikeChart(
        `Spike: ${p.jobs} jobs due at once — start times (10 ms bins, first round)`,
        SPIKE_BINS.fromMs,
        SPIKE_BINS.fromMs + lastBin * width,
        series.map((s) => ({ label: s.label, counts: s.counts.slice(0, lastBin) })),
      ),
    );
    charts.push(name);
    out.push(`![spike start-time histogram](results/${name})`, '');
  }
  if (all.includes(DOCKET)) {
    const { runs, last, early } = spikeOutcome(bench, DOCKET, p);
    targets.push(
      check(
        // Issue 17's bar (it was 500 ms before), judged on a worker's first spike.
        `Spike: last of ${p.jobs} starts within 250 ms`,
        Number.isFinite(last) ? last <= 250 : null,
        `last start ${fmt(last)} ms after due (median)${
          spikes > 1
            ? `; ${fmt(cell(runs, 'warmLatenessMaxMs').value)} ms in the same worker's ${ordinal(spikes)} spike`
            : ''
        }`,
      ),
      check(
        'Spike: none early',
        runs.some((run) => run.status !== 'skipped') ? early === 0 : null,
        `${early} early starts over ${runs.length} rounds`,
      ),
    );
  }
  if (all.includes(LEAN)) {
    // Beside the drain's second target: the same spike, keeping no done records (decision 0022).
    const { runs, last, early } = spikeOutcome(bench, LEAN, p);
    targets.push(
      check(
        `Spike keeping no done records (retentionMs 0, default worker): last of ${p.jobs} starts within 250 ms, none early`,
        Number.isFinite(last) ? last <= 250 && early === 0 : null,
        `last start ${fmt(last)} ms after due (median), ${early} early over ${runs.length} rounds`,
      ),
    );
  }
  return out;
}

function largeSection(bench: BenchResults, outDir: string, charts: string[], targets: Target[]): string[] {
  const all = labels(bench, 'large-drain');
  if (all.length === 0 && bench.explain.length === 0) return [];
  const out = ['## 4. A large table', ''];
  const filler = bench.runs.find((run) => run.workload === 'large-drain')?.params.filler;
  out.push(
    `The drain and the stream again, in a table that also holds ${filler ?? '?'} jobs due a day later. Baselines are the fresh-table runs above (same sizes, one process).`,
    '',
  );
  const rows: string[][] = [];
  for (const label of all) {
    const p = bench.runs.find((run) => run.workload === 'large-drain' && run.label === label)!.params;
    const large = cell(runsOf(bench, 'large-drain', label, { jobs: p.jobs!, procs: 1 }), 'jobsPerSec');
    const base = cell(runsOf(bench, 'drain', label, { jobs: p.jobs!, procs: 1 }), 'jobsPerSec');
    const change = (large.value - base.value) / base.value;
    const s = bench.runs.find((run) => run.workload === 'large-stream' && run.label === label)?.params;
    const streamLarge = s
      ? cell(runsOf(bench, 'large-stream', label, { ratePerSec: s.ratePerSec! }), 'latencyP99Ms')
      : null;
    const streamBase = s ? cell(runsOf(bench, 'stream', label, { ratePerSec: s.ratePerSec! }), 'latencyP99Ms') : null;
    rows.push([
      label,
      show(base),
      show(large),
      Number.isFinite(change) ? `${round(change * 100)} %` : '—',
      streamBase ? show(streamBase) : '—',
      streamLarge ? show(streamLarge) : '—',
    ]);
    if (isDocket(label)) {
      targets.push(
        check(
          `${filler ?? '?'} future rows cost < 10 % drain throughput`,
          Number.isFinite(change) ? change > -0.1 : null,
          `${fmt(base.value)}/s fresh → ${fmt(large.value)}/s with filler (${Number.isFinite(change) ? round(change * 100) : '—'} %)`,
        ),
      );
    }
  }
  const streamRate = bench.runs.find((run) => run.workload === 'large-stream')?.params.ratePerSec;
  out.push(
    table(
      [
        'system',
        `drain ${bench.runs.find((r) => r.workload === 'large-drain')?.params.jobs} jobs/s, fresh`,
        'with filler',
        'change',
        `stream ${streamRate}/s p99 ms, fresh`,
        'with filler',
      ],
      rows,
    ),
    '',
  );
  out.push(
    ...streamSection(bench, outDir, charts, [], 'large-stream', '### Stream latency with the filler present').slice(2),
  );
  for (const capture of bench.explain) {
    out.push(
      `### The claim's plan (${capture.label}, filler present)`,
      '',
      `auto_explain (ANALYZE, no timing) during a small drain: ${capture.note}.`,
      '',
    );
    for (const plan of capture.plans) out.push('```', plan.trim(), '```', '');
    targets.push(
      check(
        `Claim stays an index range scan with ${bench.runs.find((run) => run.workload === 'large-drain')?.params.filler ?? '?'} future rows`,
        capture.plans.length > 0
          ? !capture.seqScanOnJobs && capture.plans.some((plan) => /Index (Only )?Scan/.test(plan))
          : null,
        capture.plans.length > 0
          ? capture.seqScanOnJobs
            ? 'a Seq Scan on jobs appears'
            : 'index scan, see plan'
          : capture.note,
      ),
    );
  }
  return out;
}

function limitSection(bench: BenchResults, targets: Target[]): string[] {
  if (bench.pgbench.length === 0) return [];
  const out = ['## 5. The limit: pgbench', ''];
  out.push(
    "pgbench running only the minimal SQL of one job's life — insert, lease update (the claim, `FOR UPDATE SKIP LOCKED`), delete — each statement its own transaction, against a jobs table shaped like a scheduler's. Batched = 100 jobs per statement. Unlike the drain, each lifecycle here also pays for its insert.",
    '',
  );
  const drain = cell(
    runsOf(bench, 'drain', DOCKET, {
      jobs: (bench.options.sizes as { drainJobs: number[] }).drainJobs[0]!,
      procs: 1,
    }),
    'jobsPerSec',
  ).value;
  out.push(
    table(
      ['script', 'clients', 'seconds', 'tps', 'lifecycles/s', 'Docket drain (1 proc) as % of it', 'command'],
      bench.pgbench.map((r) => [
        r.script,
        String(r.clients),
        String(r.seconds),
        fmt(r.tps),
        fmt(r.lifecyclesPerSec),
        Number.isFinite(drain) ? `${round((drain / r.lifecyclesPerSec) * 100)} %` : '—',
        `\`${r.command}\``,
      ]),
    ),
    '',
    '<details><summary>pgbench schema and scripts</summary>',
    '',
    '```sql',
    pgbenchSqlForReport(100).trim(),
    '```',
    '',
    '</details>',
    '',
  );
  const batched = bench.pgbench.find((r) => r.script === 'batched');
  if (batched && Number.isFinite(drain)) {
    targets.push(
      check(
        'How close Docket gets to PostgreSQL (drain ÷ pgbench batched)',
        null,
        `${round((drain / batched.lifecyclesPerSec) * 100)} % of ${fmt(batched.lifecyclesPerSec)} lifecycles/s`,
      ),
    );
  }
  return out;
}

/** Docket on SQLite: `docket-sqlite`, or `docket-sqlite (default)` as run.ts labels its one variant. */
function isDocketSqlite(label: string): boolean {
  return label === 'docket-sqlite' || label.startsWith('docket-sqlite (');
}

/** Docket on SQLite, this tree's or the baseline checkout's (`docket-sqlite-baseline`). */
function isSqliteLabel(label: string): boolean {
  return isDocketSqlite(label) || label === 'docket-sqlite-baseline' || label.startsWith('docket-sqlite-baseline (');
}

function sqliteSection(bench: BenchResults, targets: Target[]): string[] {
  const label = bench.runs.find((run) => isDocketSqlite(run.label))?.label ?? 'docket-sqlite';
  const baseline = bench.runs.find((run) => isSqliteLabel(run.label) && !isDocketSqlite(run.label))?.label;
  const shown = baseline ? [label, baseline] : [label];
  const drains = bench.runs.filter((run) => run.label === label && run.workload === 'drain');
  const streams = bench.runs.filter((run) => run.label === label && run.workload === 'stream');
  if (drains.length + streams.length === 0) return [];
  const out = ['## 6. Embedded: SQLite', ''];
  if (baseline) out.push(`${baseline} is the DOCKET_BASELINE checkout on SQLite, run in the same rounds.`, '');
  const dsets = paramSets(bench, 'drain', ['jobs', 'procs']).filter((p) => runsOf(bench, 'drain', label, p).length > 0);
  const rate = (which: string, p: Record<string, string | number>) =>
    cell(runsOf(bench, 'drain', which, p), 'jobsPerSec');
  out.push(
    table(
      ['drain', ...shown.flatMap((l) => [`${l} jobs/s`, 'peak RSS MiB']), ...(baseline ? ['this ÷ baseline'] : [])],
      dsets.map((p) => [
        `${p.jobs} jobs × ${p.procs} proc`,
        ...shown.flatMap((l) => [show(rate(l, p)), show(cell(runsOf(bench, 'drain', l, p), 'peakRssMb'))]),
        ...(baseline ? [ratioText(rate(label, p).value, rate(baseline, p).value)] : []),
      ]),
    ),
    '',
  );
  const ssets = paramSets(bench, 'stream', ['ratePerSec']).filter((p) => runsOf(bench, 'stream', label, p).length > 0);
  out.push(
    table(
      ['stream', 'system', 'p50 ms', 'p99 ms', 'max ms', 'backlog'],
      ssets.flatMap((p) =>
        shown.map((l) => {
          const runs = runsOf(bench, 'stream', l, p);
          return [
            `${p.ratePerSec}/s`,
            l,
            show(cell(runs, 'latencyP50Ms')),
            show(cell(runs, 'latencyP99Ms')),
            show(cell(runs, 'latencyMaxMs')),
            runs.some((r) => r.metrics.backlogGrew === 1) ? '**grew**' : 'flat',
          ];
        }),
      ),
    ),
    '',
  );
  const best = Math.max(...dsets.map((p) => rate(label, p).value).filter(Number.isFinite));
  targets.push(
    // Issue 17's bar (it was 20,000 before).
    check('SQLite ≥ 50,000 jobs/s drained', Number.isFinite(best) ? best >= 50_000 : null, `best drain ${fmt(best)}/s`),
  );
  return out;
}

function submitSection(bench: BenchResults, targets: Target[]): string[] {
  const all = labels(bench, 'submit');
  if (all.length === 0) return [];
  const sets = paramSets(bench, 'submit', ['jobs', 'batchSize']);
  const out = [
    '## 7. Submit',
    '',
    "Jobs inserted through each system's own bulk API (Docket `submitMany`, graphile-worker `addJobs`, pg-boss `insert`, BullMQ `addBulk`), one call in flight, no workers. jobs/s, median over rounds.",
    '',
  ];
  out.push(
    table(
      ['system', ...sets.map((p) => `${p.jobs} jobs, ${p.batchSize} per call`)],
      all.map((label) => [label, ...sets.map((p) => show(cell(runsOf(bench, 'submit', label, p), 'jobsPerSec')))]),
    ),
    '',
  );
  const batched = sets.find((p) => Number(p.batchSize) > 1);
  if (batched && all.includes(DOCKET)) {
    const rate = cell(runsOf(bench, 'submit', DOCKET, batched), 'jobsPerSec').value;
    targets.push(
      check(
        // Issue 17's bar (it was 50,000 before).
        'Submit ≥ 100,000 jobs/s batched',
        Number.isFinite(rate) ? rate >= 100_000 : null,
        `${fmt(rate)}/s in batches of ${batched.batchSize}`,
      ),
    );
  }
  return out;
}

function singleSubmitSection(bench: BenchResults, targets: Target[]): string[] {
  const all = labels(bench, 'single-submit');
  if (all.length === 0) return [];
  const capacity = bench.runs.find((r) => r.workload === 'single-submit' && r.params.mode === 'capacity')?.params;
  const latency = bench.runs.find((r) => r.workload === 'single-submit' && r.params.mode === 'latency')?.params;
  const out = [
    '## 7b. Single submits',
    '',
    "One job per call through each system's single-job API with its defaults (Docket `submit`, graphile-worker " +
      '`addJob`, pg-boss `send`, BullMQ `add`), as a web app submits while it serves requests. Capacity: ' +
      `${capacity?.jobs ?? '?'} jobs from ${capacity?.inFlight ?? '?'} concurrent callers, no workers. Latency: ` +
      `${latency?.ratePerSec ?? '?'} submits/s offered for ${Number(latency?.durationMs ?? 0) / 1000} s (at most ` +
      `${latency?.inFlight ?? '?'} in flight) with one default worker; enqueue to start, from each call's slot in the schedule. Medians over rounds.` +
      (all.includes('raw-sql')
        ? ' The raw-SQL reference is a submit path without group commit: each call one `INSERT` with its own ' +
          '`pg_notify` and commit (a pool of 10 connections), its worker claiming on every notification; ' +
          'PostgreSQL serialises the commits of notifying transactions.'
        : ''),
    '',
  ];
  const cap = (label: string) => (capacity ? runsOf(bench, 'single-submit', label, capacity) : []);
  const lat = (label: string) => (latency ? runsOf(bench, 'single-submit', label, latency) : []);
  out.push(
    table(
      ['system', 'capacity jobs/s', 'call p50 / p99', 'offered /s', 'start latency p50 / p99'],
      all.map((label) => [
        label,
        show(cell(cap(label), 'jobsPerSec')),
        `${show(cell(cap(label), 'callP50Ms'), ' ms')} / ${show(cell(cap(label), 'callP99Ms'), ' ms')}`,
        show(cell(lat(label), 'offeredPerSec')),
        `${show(cell(lat(label), 'latencyP50Ms'), ' ms')} / ${show(cell(lat(label), 'latencyP99Ms'), ' ms')}`,
      ]),
    ),
    '',
  );
  const keyed = bench.runs.find((r) => r.workload === 'single-submit' && r.params.mode === 'capacity-keyed')?.params;
  if (keyed) {
    const withKey = (label: string) => runsOf(bench, 'single-submit', label, keyed);
    out.push(
      `Keyed: the capacity run again, each call carrying a caller's key never used before (\`job-<run>-<i>\`) through the system's own deduplication option (Docket \`submit({ idempotencyKey })\`, graphile-worker \`addJob(…, { jobKey })\`, pg-boss \`send(…, { singletonKey })\`, BullMQ \`add(…, { jobId })\`; the raw-SQL reference has none), right after each system's unkeyed run; every call still leaves one job. pg-boss stores the key, but on its default (standard-policy) queue no index enforces it: it deduplicates by \`singletonKey\` only in the other queue policies or within a \`singletonSeconds\` slot.`,
      '',
      table(
        ['system', 'keyed jobs/s', 'call p50 / p99', 'keyed ÷ unkeyed'],
        all
          .filter((label) => withKey(label).length > 0)
          .map((label) => [
            label,
            show(cell(withKey(label), 'jobsPerSec')),
            `${show(cell(withKey(label), 'callP50Ms'), ' ms')} / ${show(cell(withKey(label), 'callP99Ms'), ' ms')}`,
            ratioText(cell(withKey(label), 'jobsPerSec').value, cell(cap(label), 'jobsPerSec').value),
          ]),
      ),
      '',
    );
  }
  const docket = all.find((label) => label === 'docket (default)' || label === 'docket');
  if (docket) {
    const rate = cell(cap(docket), 'jobsPerSec').value;
    targets.push(
      check(
        'Single submits ≥ 10,000 jobs/s at 100 in flight',
        Number.isFinite(rate) ? rate >= 10_000 : null,
        `${fmt(rate)}/s`,
      ),
    );
    const p99 = cell(lat(docket), 'latencyP99Ms').value;
    targets.push(
      check(
        'Single submits at 1,000/s: start p99 ≤ 5 ms (default settings)',
        Number.isFinite(p99) ? p99 <= 5 : null,
        `p99 ${fmt(p99)} ms`,
      ),
    );
  }
  return out;
}

/** Delayed single submits: each job due `delayMs` after its call (workloads.ts delayedRun). */
function delayedSection(bench: BenchResults): string[] {
  const all = labels(bench, 'delayed');
  if (all.length === 0) return [];
  const p = paramSets(bench, 'delayed', ['ratePerSec', 'durationMs', 'delayMs', 'inFlight', 'jobs'])[0]!;
  const out = [
    '## 7d. Delayed single submits',
    '',
    `The reminder case ("send this at 9:00"): as in the single-submit latency run (section 7b: one worker process in each system's default configuration, ${p.ratePerSec} calls/s offered open loop for ${Number(p.durationMs) / 1000} s, at most ${p.inFlight} in flight), each job due ${p.delayMs} ms after its call through the system's own run-time option: Docket \`submit({ runAt })\` (epoch ms), graphile-worker \`addJob(…, { runAt })\` and pg-boss \`send(…, { startAfter })\` (a Date), BullMQ \`add(…, { delay })\` (ms). The raw-SQL reference has no run time on its single submit and is not run. Lateness is a handler start's \`Date.now()\` minus the run time asked for (\`Date.now() + ${p.delayMs}\` just before the call), whole ms on the one wall clock the host, the database and Redis share; a job that never started counts at the cap. Early: starts before their run time, summed over rounds (a Docket run with any fails). Medians over rounds; started: of ${p.jobs} jobs per run.`,
    '',
  ];
  const rows = all.map((label) => {
    const runs = runsOf(bench, 'delayed', label, p);
    const counted = runs.filter((run) => run.status !== 'skipped');
    const early = counted.reduce((sum, run) => sum + (run.metrics.early ?? 0), 0);
    const started = counted.map((run) => fmt(run.metrics.started ?? Number.NaN));
    return [
      label,
      show(cell(runs, 'offeredPerSec')),
      show(cell(runs, 'latenessP50Ms')),
      show(cell(runs, 'latenessP90Ms')),
      show(cell(runs, 'latenessP99Ms')),
      show(cell(runs, 'latenessMaxMs')),
      counted.length > 0 ? String(early) : '—',
      started.length > 0 ? started.join(', ') : '—',
    ];
  });
  out.push(
    table(
      [
        'system',
        'offered /s',
        'lateness p50 ms',
        'p90 ms',
        'p99 ms',
        'max ms',
        'early',
        `started (each round, of ${fmt(Number(p.jobs))})`,
      ],
      rows,
    ),
    '',
  );
  return out;
}

/** Remote HTTP workers of `docket serve`: a drain, a stream, a delayed stream (bench/remote-workers.ts). */
function remoteWorkersSection(bench: BenchResults): string[] {
  const all = labels(bench, 'remote-workers');
  if (all.length === 0) return [];
  const phase = (name: string) =>
    paramSets(bench, 'remote-workers', [
      'phase',
      'jobs',
      'workers',
      'limit',
      'ratePerSec',
      'durationMs',
      'delayMs',
      'statsFlushMs',
    ])
      .map((p) => Object.fromEntries(Object.entries(p).filter(([, value]) => value !== undefined)))
      .find((p) => p.phase === name);
  const drain = phase('drain');
  const stream = phase('stream');
  const delayed = phase('delayed-stream');
  const flushMs = Number(drain?.statsFlushMs ?? stream?.statsFlushMs ?? 0);
  const transactions =
    flushMs > 0
      ? `Transactions: \`xact_commit\` of the scratch database over the phase per job, the harness's submits included, read ${fmt(flushMs)} ms after the phase ended (PostgreSQL 15 holds a backend's counters up to 10 s; an idle server commits nothing); PostgreSQL only.`
      : "Transactions: not counted in this run (a smoke run does not wait the 11 s PostgreSQL 15 may hold a backend's counters).";
  const out = [
    '## 7e. Remote workers over HTTP',
    '',
    `Remote workers as docs/http-api.md describes them, against \`docket serve\` with its defaults (only \`--db\`, \`--port\` and \`--log-level warn\`; no tokens, loopback, no handlers) from each checkout's own CLI (\`docket-baseline\`: DOCKET_BASELINE's), on a fresh store each run. The workers run in one client process of their own (not the harness, which submits), each a loop: \`POST /v1/worker/claim\` with \`limit\`, \`waitMs: 5000\` and \`kinds: ["bench.noop"]\`, then a \`POST /v1/worker/jobs/{id}/complete\` per claimed job, all of one claim's at once. Three phases per run on the same server, each ending when every one of its jobs was completed once (a job completed twice or never fails the run): **drain**, ${drain ? fmt(Number(drain.jobs)) : '—'} jobs submitted in batches of up to 1,000 (library \`submitMany\`) before ${drain?.workers ?? '—'} workers with limit ${drain?.limit ?? '—'} start, jobs/s from the first claim to the last completion; **stream**, ${stream?.workers ?? '—'} workers with limit ${stream?.limit ?? '—'} waiting, then ${stream?.ratePerSec ?? '—'} jobs/s for ${stream ? Number(stream.durationMs) / 1000 : '—'} s submitted by the harness, one library \`submit()\` each, open loop, due now; **delayed stream**, the same with \`delayMs: ${delayed?.delayMs ?? '—'}\` on each submit. Lateness is the claim answer's \`Date.now()\` minus the job's \`runAt\` (the database's clock, this host's). Server CPU: the server process's user + system time over the phase per job (SQLite's writes run inside it; PostgreSQL's in its backends, which this leaves out). ${transactions} Claims: claim requests per job, empty ones included. Client CPU: the client process's, per job (the drain's workers must not be bound by it). Medians over rounds (jobs/s with each round in brackets). The client, the server, the harness and the database share the machine's cores.`,
    '',
  ];
  const costs = (runs: RunRecord[]) => [
    show(cell(runs, 'serverCpuMsPerJob'), ' ms'),
    show(cell(runs, 'xactPerJob')),
    show(cell(runs, 'claimsPerJob')),
    show(cell(runs, 'clientCpuMsPerJob'), ' ms'),
  ];
  const costHeader = ['server CPU / job', 'transactions / job', 'claims / job', 'client CPU / job'];
  if (drain) {
    out.push(`### Drain: ${fmt(Number(drain.jobs))} jobs, ${drain.workers} workers, limit ${drain.limit}`, '');
    const rows = all.map((label) => {
      const runs = runsOf(bench, 'remote-workers', label, drain);
      return [label, showWithRounds(runs, 'jobsPerSec'), ...costs(runs)];
    });
    out.push(table(['system', 'jobs/s [rounds]', ...costHeader], rows), '');
  }
  for (const [p, title] of [
    [stream, 'Stream'],
    [delayed, 'Delayed stream'],
  ] as const) {
    if (!p) continue;
    const delay = p.delayMs === undefined ? 'due now' : `each due ${p.delayMs} ms after its submit`;
    out.push(
      `### ${title}: ${p.ratePerSec} jobs/s for ${Number(p.durationMs) / 1000} s, ${delay}; ${p.workers} workers, limit ${p.limit}`,
      '',
    );
    const rows = all.map((label) => {
      const runs = runsOf(bench, 'remote-workers', label, p);
      return [
        label,
        `${show(cell(runs, 'latenessP50Ms'))} / ${show(cell(runs, 'latenessP99Ms'))} / ${show(cell(runs, 'latenessMaxMs'))}`,
        ...costs(runs),
      ];
    });
    out.push(table(['system', 'lateness p50 / p99 / max, ms', ...costHeader], rows), '');
  }
  return out;
}

/**
 * Single submits beside neighbours: the single-submit latency run with idle worker processes of
 * another queue started first (workloads.ts singleSubmitLatencyRun, `neighbours`).
 */
function neighboursSection(bench: BenchResults): string[] {
  const all = labels(bench, 'neighbours');
  if (all.length === 0) return [];
  const p = paramSets(bench, 'neighbours', [
    'ratePerSec',
    'durationMs',
    'inFlight',
    'jobs',
    'neighbours',
    'statsFlushMs',
  ])[0]!;
  const flushMs = Number(p.statsFlushMs ?? 0);
  const transactions =
    flushMs > 0
      ? `Transactions: \`xact_commit\` of the scratch database per job, from ${fmt(flushMs)} ms after the workers started (PostgreSQL 15 holds a backend's counters up to 10 s, so their start-ups are not counted) until every worker process had exited and the harness's store was closed (a backend publishes its counters as it exits): the submits, the stream's claims and completions, the neighbours' claims and polls, the workers' stops; PostgreSQL only.`
      : "Transactions: not counted in this run (a smoke run does not wait the 11 s PostgreSQL 15 may hold a backend's counters).";
  const out = [
    '## 7f. Single submits beside neighbours',
    '',
    `Other services sharing the store: the single-submit latency run of section 7b (one worker process in each system's default configuration, ${p.ratePerSec} calls/s offered open loop for ${Number(p.durationMs) / 1000} s, at most ${p.inFlight} in flight; start latency from each call's slot in the schedule) with ${p.neighbours} more worker process${Number(p.neighbours) === 1 ? '' : 'es'} of the same system and configuration started before the stream, each claiming work the stream never feeds: Docket a worker with \`queues: ['${NEIGHBOUR_QUEUE}']\` (it handles the stream's kind; only the queue differs), pg-boss \`work('${NEIGHBOUR_QUEUE}')\`, BullMQ a \`Worker\` on queue \`${NEIGHBOUR_QUEUE}\`, graphile-worker a task list of only the task \`${NEIGHBOUR_QUEUE}\` (graphile-worker has no per-worker queue filter: its queues serialise jobs rather than route them, so a worker of another service is one with other tasks). Docket on SQLite: its neighbours are other processes on the same file. The raw-SQL reference has no other queue and is not run. A neighbour that starts any job fails the run. Compare the latency with section 7b's (the same run without neighbours). ${transactions} Neighbour CPU: each neighbour process's user + system time over the offer as a share of one core (/proc), their mean. Medians over rounds; started: of ${p.jobs} jobs per run.`,
    '',
  ];
  const rows = all.map((label) => {
    const runs = runsOf(bench, 'neighbours', label, p);
    const started = runs.filter((run) => run.status !== 'skipped').map((run) => fmt(run.metrics.started ?? Number.NaN));
    return [
      label,
      show(cell(runs, 'offeredPerSec')),
      show(cell(runs, 'latencyP50Ms')),
      show(cell(runs, 'latencyP90Ms')),
      show(cell(runs, 'latencyP99Ms')),
      show(cell(runs, 'latencyMaxMs')),
      show(cell(runs, 'xactPerJob')),
      show(cell(runs, 'neighbourCpuPercent'), ' %'),
      started.length > 0 ? started.join(', ') : '—',
    ];
  });
  out.push(
    table(
      [
        'system',
        'offered /s',
        'start latency p50 ms',
        'p90 ms',
        'p99 ms',
        'max ms',
        'transactions / job',
        'CPU per neighbour',
        `started (each round, of ${fmt(Number(p.jobs))})`,
      ],
      rows,
    ),
    '',
  );
  return out;
}

/** The floor of the HTTP single submits (bench/http-submit.ts HTTP_FLOOR_LABEL). */
const HTTP_FLOOR = 'http floor (bare node:http, no store)';

/** A cell's median and, in brackets, each ok round's value in round order. */
function showWithRounds(runs: RunRecord[], metric: string, unit = ''): string {
  const values = runs
    .filter((run) => run.status === 'ok')
    .sort((a, b) => a.round - b.round)
    .map((run) => fmt(run.metrics[metric] ?? Number.NaN));
  const c = cell(runs, metric);
  return c.ok > 0 ? `${show(c, unit)} [${values.join(', ')}]` : show(c, unit);
}

/** Single submits over HTTP: `docket serve` against a bare node:http server (bench/http-submit.ts). */
function httpSubmitSection(bench: BenchResults): string[] {
  const all = labels(bench, 'http-submit');
  if (all.length === 0) return [];
  const modes = paramSets(bench, 'http-submit', ['jobs', 'inFlight', 'mode']);
  const p = modes[0]!;
  const servers = [...all.filter((label) => label !== HTTP_FLOOR), ...all.filter((label) => label === HTTP_FLOOR)];
  const out = [
    '## 7c. Single submits over HTTP',
    '',
    `${p.jobs} \`POST /v1/jobs\` requests per run (body \`{"kind":"bench.noop","payload":{"i":i}}\`; keyed: with a fresh \`"idempotencyKey"\` each), ${p.inFlight} in flight from the bench process over one keep-alive \`node:http\` agent of as many sockets, each answer required to be 201 and the store to hold one job per request afterwards. \`docket serve\` runs with its defaults (a user's first \`docket serve\`: a JSON log line per request on stdout, here to a file; no tokens, loopback; no handlers) on a fresh store each run, from each checkout's own CLI (\`docket-baseline\`: DOCKET_BASELINE's). The floor is a bare \`node:http\` server that reads and \`JSON.parse\`s each body and answers 201, storing nothing: this client's ceiling on this machine. Jobs/s is n over the time from the first request to the last answer, median over rounds with each round in brackets; call time from a request's start to its answer's end; server CPU is the server process's user + system time per request (SQLite's writes run inside the server process, PostgreSQL's in its own backends, which this leaves out); ÷ floor against the floor in the same mode. The client, the server and the database share the machine's cores.`,
    '',
  ];
  const rows: string[][] = [];
  for (const label of servers) {
    for (const mode of modes) {
      const runs = runsOf(bench, 'http-submit', label, mode);
      if (runs.length === 0) continue;
      const floor = cell(runsOf(bench, 'http-submit', HTTP_FLOOR, mode), 'jobsPerSec').value;
      rows.push([
        label,
        String(mode.mode),
        showWithRounds(runs, 'jobsPerSec'),
        `${show(cell(runs, 'callP50Ms'), ' ms')} / ${show(cell(runs, 'callP99Ms'), ' ms')}`,
        show(cell(runs, 'serverCpuUsPerRequest'), ' µs'),
        label === HTTP_FLOOR ? '1×' : ratioText(cell(runs, 'jobsPerSec').value, floor),
      ]);
    }
  }
  out.push(
    table(['server', 'mode', 'jobs/s [rounds]', 'call p50 / p99', 'server CPU per request', '÷ floor'], rows),
    '',
  );
  return out;
}

function memorySection(bench: BenchResults, targets: Target[]): string[] {
  const runs = bench.runs.filter((run) => run.workload === 'memory');
  if (runs.length === 0) {
    targets.push(
      check('Worker RSS flat across a 10-minute stream at 1,000/s', null, 'not run (`--only memory` or the full run)'),
    );
    return [];
  }
  const out = ['## Memory: a long stream', ''];
  for (const run of runs) {
    const rss = run.rss[0];
    const timeline = run.rssTimeline?.[0] ?? [];
    const atMinute = timeline.find(([seconds]) => seconds >= 60)?.[1] ?? rss?.startMb ?? Number.NaN;
    const end = rss?.endMb ?? Number.NaN;
    const flat = Number.isFinite(atMinute) && Number.isFinite(end) ? end <= atMinute * 1.1 : null;
    out.push(
      `${run.label}: ${run.params.ratePerSec} jobs/s for ${Number(run.params.durationMs) / 60_000} min — RSS start ${fmt(rss?.startMb ?? Number.NaN)} MiB, after 1 min ${fmt(atMinute)} MiB, peak ${fmt(rss?.peakMb ?? Number.NaN)} MiB, end ${fmt(end)} MiB; p99 latency ${fmt(run.metrics.latencyP99Ms ?? Number.NaN)} ms; status ${run.status}.`,
      '',
    );
    targets.push(
      check(
        'Worker RSS flat across a 10-minute stream at 1,000/s (end ≤ 1.1 × the 1-minute value)',
        flat,
        `start ${fmt(rss?.startMb ?? Number.NaN)}, 1 min ${fmt(atMinute)}, peak ${fmt(rss?.peakMb ?? Number.NaN)}, end ${fmt(end)} MiB`,
      ),
    );
  }
  return out;
}

function profileSection(bench: BenchResults): string[] {
  if (bench.profiles.length === 0 && Object.keys(bench.waits).length === 0) return [];
  const out = ["## Where Docket's time goes", ''];
  out.push(
    `One extra Docket drain (one worker process) run with \`node --cpu-prof\` while \`pg_stat_activity\` was sampled every 20 ms${bench.profileRun ? ` (${fmt(bench.profileRun.jobsPerSec)} jobs/s, ${bench.profileRun.status}; profiling slows it)` : ''}.`,
    '',
  );
  for (const profile of bench.profiles) {
    out.push(
      `Worker process profile: ${fmt(profile.totalMs)} ms recorded, ${round(profile.idleShare * 100)} % idle (waiting on the database).`,
      '',
    );
    out.push(
      table(
        ['self time by package / file', 'ms', 'share'],
        profile.topPackages.map((e) => [e.name, fmt(e.selfMs), `${round(e.share * 100)} %`]),
      ),
      '',
    );
    out.push(
      table(
        ['self time by function', 'ms', 'share'],
        profile.topFunctions.map((e) => [`\`${e.name}\``, fmt(e.selfMs), `${round(e.share * 100)} %`]),
      ),
      '',
    );
  }
  const waits = Object.entries(bench.waits)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12);
  if (waits.length > 0) {
    out.push(
      table(
        ['database sessions: wait event + statement', 'samples'],
        waits.map(([key, count]) => [`\`${key.replace(/\|/g, '\\|')}\``, String(count)]),
      ),
      '',
    );
  }
  return out;
}

function failuresSection(bench: BenchResults): string[] {
  const bad = bench.runs.filter((run) => run.status !== 'ok');
  if (bad.length === 0)
    return ['## Runs that were not ok', '', 'None: every run ran every job exactly once within its time cap.', ''];
  return [
    '## Runs that were not ok',
    '',
    '`failed` = lost or doubled jobs (never counted as fast); `timeout` = did not finish within its cap (its rate is not in the medians); `error` = the run broke; `skipped` = not attempted.',
    '',
    table(
      ['workload', 'params', 'system', 'round', 'status', 'why'],
      bad.map((run) => [
        run.workload,
        `\`${JSON.stringify(run.params)}\``,
        run.label,
        String(run.round),
        run.status,
        run.problems.join('; ').replace(/\|/g, '\\|').slice(0, 300),
      ]),
    ),
    '',
  ];
}

/** Writes RESULTS.md, results.json and the charts into `outDir`; returns the paths written. */
export function writeReport(bench: BenchResults, outDir: string): string[] {
  mkdirSync(join(outDir, 'results'), { recursive: true });
  chooseDocketLabel(bench);
  const charts: string[] = [];
  const targets: Target[] = [];
  const m = bench.machine;
  const body = [
    ...drainSection(bench, targets),
    ...backlogSection(bench, targets),
    ...backfillSection(bench),
    ...outageSection(bench),
    ...kindsSection(bench),
    ...streamSection(bench, outDir, charts, targets),
    ...spikeSection(bench, outDir, charts, targets),
    ...scheduleSpikeSection(bench),
    ...largeSection(bench, outDir, charts, targets),
    ...limitSection(bench, targets),
    ...sqliteSection(bench, targets),
    ...submitSection(bench, targets),
    ...singleSubmitSection(bench, targets),
    ...httpSubmitSection(bench),
    ...delayedSection(bench),
    ...remoteWorkersSection(bench),
    ...neighboursSection(bench),
    ...dashboardSection(bench, targets),
    ...memorySection(bench, targets),
    ...profileSection(bench),
    ...failuresSection(bench),
  ];
  const missed = targets.filter((t) => t.met === false);
  const lines = [
    `# Docket benchmark results${bench.mode === 'smoke' ? ' (SMOKE: tiny sizes, not a measurement)' : ''}`,
    '',
    `Generated by \`${bench.command}\` from ${bench.startedAt} to ${bench.finishedAt}. Raw data: [results.json](results.json). Re-run: \`npm run bench\` (see bench/run.ts for options).`,
    '',
    '## Machine and versions',
    '',
    table(
      ['', ''],
      [
        ['CPU', m.cpu],
        ['memory', `${m.memoryGb} GiB`],
        ['OS', m.os],
        ['Node', m.node],
        ['PostgreSQL', m.postgres],
        ['Redis', m.redis],
        ['SQLite', m.sqlite],
        ...Object.entries(m.versions).map(([name, version]) => [name, version]),
        [
          'database clock − host clock',
          `${fmt(m.dbClockOffsetMs)} ms (± ${fmt(m.dbClockErrorBoundMs)} ms); the database, Redis and every worker run on this one host and share its clock`,
        ],
        ...(m.postgresSettings
          ? [
              [
                'PostgreSQL settings',
                Object.entries(m.postgresSettings)
                  .map(([k, v]) => `${k} = ${v}`)
                  .join(', '),
              ],
            ]
          : []),
      ],
    ),
    '',
    "Everything runs on loopback on this one machine: the harness, the worker processes, PostgreSQL and Redis compete for the same cores, so absolute numbers are this machine's; the ratios are the point.",
    '',
    '## Configurations',
    '',
    `Every system runs a no-op handler at the same concurrency (${String(bench.options.concurrency)} per worker process unless its configuration says otherwise), each in its own scratch PostgreSQL database (BullMQ: its own Redis key prefix), created fresh for each run and dropped at the end. "default" is the library's defaults; "tuned" is its best published configuration.`,
    '',
    table(
      ['system', 'configuration'],
      bench.configs.map((c) => {
        const nodes = [
          ...new Set(bench.runs.filter((r) => r.label === c.label && r.workerNode).map((r) => r.workerNode)),
        ];
        const on = nodes.length > 0 ? `; worker processes on Node ${nodes.join(', ')}` : '';
        return [c.label, `${c.config}${on}`.replace(/\|/g, '\\|')];
      }),
    ),
    '',
    ...(Object.keys(bench.unavailable).length > 0
      ? [
          'Not run (driver failed to load):',
          '',
          ...Object.entries(bench.unavailable).map(([s, why]) => `- ${s}: ${why}`),
          '',
        ]
      : []),
    `Rounds: ${String(bench.options.rounds)}, the systems alternating in rotated order each round. Tables show medians over the rounds that were ok; "(k/n ok)" marks cells where some rounds failed or timed out.`,
    '',
    '## Targets',
    '',
    missed.length > 0
      ? `**${missed.length} target(s) missed.** Where the time goes is in "Where Docket's time goes" below.`
      : 'No measured target was missed.',
    '',
    table(
      ['target', 'result', 'measured'],
      targets.map((t) => [t.name, t.met === null ? 'not measured' : t.met ? 'met' : '**MISSED**', t.detail]),
    ),
    '',
    ...body,
    '## Method notes',
    '',
    "- Each handler records the job's bench index and its start time (in the worker process) as its first act; the harness counts starts per job. A duplicate start, a start of a job outside the run, or a job still unfinished after every handler ran fails the run.",
    '- Drain throughput runs from the first handler start to the moment the store reports no due, unfinished job (polled every 5 ms), so batched completions are included.',
    '- Worker processes are forked, import their system, and are then started together, so module loading does not stagger the two-process drain. RSS is sampled every 200 ms inside each worker process.',
    "- Lateness and early starts compare wall-clock times; the database and the workers share this host's clock (offset above), so the wall clock is the database clock here.",
    "- Other times compared across processes (a submit here, a start in a worker) are read on the host's monotonic clock, with one anchor the harness hands every process it starts, so a step or slew of the wall clock cannot enter a latency.",
    '',
  ];
  const md = join(outDir, 'RESULTS.md');
  const json = join(outDir, 'results.json');
  // The shard benchmark (`--shards`) writes its own section; this report keeps it as it was.
  const shards = existsSync(md) ? existingShardSection(readFileSync(md, 'utf8')) : '';
  if (shards) lines.push(shards, '');
  writeFileSync(md, lines.join('\n'));
  writeFileSync(json, `${JSON.stringify(bench, null, 1)}\n`);
  return [md, json, ...charts.map((name) => join(outDir, 'results', name))];
}

/** The dashboard-query table: each call's median against the 150 ms target. */
function dashboardSection(bench: BenchResults, targets: Target[]): string[] {
  const timings = bench.dashboard ?? [];
  if (timings.length === 0) return [];
  for (const timing of timings) {
    targets.push(
      check(
        `dashboard ${timing.store}: ${timing.call} < ${DASHBOARD_TARGET_MS} ms`,
        timing.status < 400 && timing.medianMs < DASHBOARD_TARGET_MS,
        `median ${timing.medianMs} ms (HTTP ${timing.status})`,
      ),
    );
  }
  const pending = bench.mode === 'smoke' ? 1_000 : 1_000_000;
  return ['## Dashboard queries', '', dashboardTable(timings, pending, pending), ''];
}
