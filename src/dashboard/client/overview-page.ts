/**
 * Overview: per queue, counts by state and their trend over the last minute, paused queues
 * marked; throughput and start lateness over the last hour as live charts (GET /v1/activity).
 */
import { get } from './api.js';
import { format, lineChart, type Series } from './chart.js';
import { badge, type Child, el, replace, table } from './dom.js';
import { follow } from './live.js';
import type { PageContext } from './page.js';
import { status } from './page.js';

const COUNT_STATES = ['scheduled', 'available', 'running', 'unhandled', 'done', 'dead'] as const;
const STATE_LABELS: Record<(typeof COUNT_STATES)[number], string> = {
  scheduled: 'Scheduled',
  available: 'Available',
  running: 'Running',
  unhandled: 'Waiting for a handler',
  done: 'Done',
  dead: 'Dead',
};

type Counts = Record<(typeof COUNT_STATES)[number], number> & { estimated?: string[] };

/** One queue's row of GET /v1/overview. */
export interface QueueOverview extends Counts {
  queue: string;
  paused?: boolean;
}

/** The GET /v1/overview body. */
export interface Overview {
  at: string;
  queues: QueueOverview[];
  totals: Counts;
  /** How long done records are kept; 0: each job is deleted as it completes. */
  retentionMs: number;
}

interface Activity {
  from: string;
  to: string;
  buckets: {
    at: string;
    completedPerSecond: number;
    failedPerSecond: number;
    lateness: { p50: number; p95: number; p99: number } | null;
  }[];
}

/** The overview counts (GET /v1/overview). */
export function fetchOverview(): Promise<Overview> {
  return get<Overview>('v1/overview');
}

/** A count, marked `≈` when it is the planner's estimate. */
function count(row: Counts, state: (typeof COUNT_STATES)[number]): string {
  const estimated = row.estimated?.includes(state) ?? false;
  return `${estimated ? '≈' : ''}${format(row[state])}`;
}

/** The change since the snapshot a minute ago, as "↑12" / "↓3" (empty when unchanged). */
function trend(now: number, before: number | undefined): HTMLElement | null {
  if (before === undefined || now === before) return null;
  const delta = now - before;
  return el(
    'span',
    { class: delta > 0 ? 'trend-up' : 'trend-down', title: 'change over the last minute' },
    ` ${delta > 0 ? '↑' : '↓'}${format(Math.abs(delta))}`,
  );
}

/** Draws the overview page. */
export async function renderOverview(context: PageContext): Promise<void> {
  const countsPanel = el('section', { 'aria-labelledby': 'counts-title' });
  const charts = el('section', { class: 'grid', 'aria-label': 'Activity over the last hour' });
  replace(context.main, el('h1', {}, 'Overview'), countsPanel, el('h2', {}, 'Last hour'), charts);
  // Snapshots of the last few minutes, for the trend arrows.
  const history: { atMs: number; queues: Map<string, QueueOverview> }[] = [];

  const drawCounts = (overview: Overview) => {
    const nowMs = Date.parse(overview.at);
    history.push({ atMs: nowMs, queues: new Map(overview.queues.map((q) => [q.queue, q])) });
    while (history.length > 2 && (history[1]?.atMs ?? nowMs) <= nowMs - 60_000) history.shift();
    const before = history[0]?.atMs !== undefined && history[0].atMs <= nowMs - 30_000 ? history[0] : undefined;
    const rows: Child[][] = overview.queues.map((q) => [
      el('a', { href: `#/jobs?queue=${encodeURIComponent(q.queue)}` }, q.queue),
      q.paused ? badge('paused') : badge('active', 'live'),
      ...COUNT_STATES.map((state) =>
        el('span', { 'data-state': state }, count(q, state), trend(q[state], before?.queues.get(q.queue)?.[state])),
      ),
    ]);
    rows.push([
      el('strong', {}, 'All queues'),
      '',
      ...COUNT_STATES.map((state) => el('strong', { 'data-state': state }, count(overview.totals, state))),
    ]);
    replace(
      countsPanel,
      el('h2', { id: 'counts-title' }, 'Queues'),
      overview.queues.length === 0
        ? el('p', { class: 'muted' }, 'No jobs yet. Submit one (docket submit, POST /v1/jobs) and it shows up here.')
        : table(
            'Jobs per queue and state',
            ['Queue', 'Status', ...COUNT_STATES.map((s) => STATE_LABELS[s])],
            rows,
            [2, 3, 4, 5, 6, 7],
          ),
      overview.totals.estimated && overview.totals.estimated.length > 0
        ? el(
            'p',
            { class: 'muted' },
            '≈ marks the database planner’s estimate, used for large counts so a refresh never counts a whole table.',
          )
        : null,
      overview.retentionMs === 0
        ? el(
            'p',
            { class: 'muted', 'data-note': 'no-done-records' },
            'Done jobs are not kept (retentionMs 0): each job is deleted as it completes, so Done stays 0 and the chart shows no completions.',
          )
        : null,
    );
    status(`Updated ${new Date(nowMs).toLocaleTimeString()}`);
  };

  let activityAtMs = 0;
  const drawActivity = async () => {
    const activity = await get<Activity>('v1/activity?minutes=60');
    activityAtMs = Date.now();
    const from = Date.parse(activity.from);
    const to = Date.parse(activity.to);
    const points = (pick: (b: Activity['buckets'][number]) => number | undefined) =>
      activity.buckets.flatMap((b) => {
        const v = pick(b);
        return v === undefined ? [] : [{ t: Date.parse(b.at), v }];
      });
    const throughput: Series[] = [
      { name: 'completed', points: points((b) => b.completedPerSecond) },
      { name: 'failed', points: points((b) => b.failedPerSecond) },
    ];
    const lateness: Series[] = (['p50', 'p95', 'p99'] as const).map((p) => ({
      name: p,
      points: points((b) => b.lateness?.[p]),
    }));
    replace(
      charts,
      lineChart('Throughput', throughput, from, to, 'jobs/s'),
      lineChart('Start lateness', lateness, from, to, 'ms'),
    );
  };

  const refresh = async () => {
    drawCounts(await fetchOverview());
    await drawActivity();
  };
  follow(
    context,
    {
      overview: (data) => {
        drawCounts(data as Overview);
        // Minute buckets: re-reading the series every 10 s keeps the charts live enough.
        if (Date.now() - activityAtMs > 10_000) void drawActivity().catch(() => {});
      },
    },
    refresh,
  );
}
