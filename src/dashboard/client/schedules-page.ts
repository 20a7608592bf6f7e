/**
 * Schedules: cron, zone, the next five run times, last slot, misfire policy and jitter, with
 * pause, resume and run now for an admin token.
 */
import { get, post } from './api.js';
import { badge, el, replace, table } from './dom.js';
import { duration, when } from './format.js';
import { can, every, type PageContext, report, status } from './page.js';

interface ScheduleJson {
  id: string;
  cron: string;
  timeZone: string;
  paused: boolean;
  job: { kind: string; queue: string };
  jitterMs: number;
  jitterMode?: string;
  misfire: { policy: string; catchUpWindowMs?: number; maxCatchUpRuns?: number } | string;
  lastSlotAt: string | null;
  nextRunAt: string | null;
  upcoming?: string[];
}

function misfireText(misfire: ScheduleJson['misfire']): string {
  if (typeof misfire === 'string') return misfire;
  const parts = [misfire.policy];
  if (misfire.catchUpWindowMs !== undefined) parts.push(`window ${duration(misfire.catchUpWindowMs)}`);
  if (misfire.maxCatchUpRuns !== undefined) parts.push(`≤ ${misfire.maxCatchUpRuns} runs`);
  return parts.join(', ');
}

/** Draws the schedules page (every schedule, paged by the API's cursor). */
export async function renderSchedules(context: PageContext): Promise<void> {
  const list = el('section', { 'aria-label': 'Schedules', 'aria-live': 'polite' });
  replace(context.main, el('h1', {}, 'Schedules'), list);
  const admin = can(context, 'admin');
  let lastDrawn = '';

  const load = async () => {
    const schedules: ScheduleJson[] = [];
    let after: string | null = null;
    // Schedules are few (one per recurring task); the page lists them all, 100 per call.
    do {
      const page: { schedules: ScheduleJson[]; next: string | null } = await get(
        `v1/schedules?limit=100${after === null ? '' : `&after=${encodeURIComponent(after)}`}`,
      );
      schedules.push(...page.schedules);
      after = page.next;
    } while (after !== null && schedules.length < 5000);
    const signature = JSON.stringify(schedules);
    if (signature === lastDrawn) return;
    lastDrawn = signature;
    const act = (label: string, path: string) => async () => {
      try {
        await post(path);
        status(label);
        await load();
      } catch (error) {
        report(context, error);
      }
    };
    replace(
      list,
      schedules.length === 0
        ? el('p', { class: 'muted' }, 'No schedules. Create one with docket schedules set or POST /v1/schedules.')
        : table(
            'Schedules',
            [
              'Id',
              'Cron',
              'Zone',
              'Job',
              'Next five runs',
              'Last slot',
              'Misfire',
              'Jitter',
              'Status',
              admin ? 'Actions' : '',
            ],
            schedules.map((s) => [
              el('span', { class: 'mono' }, s.id),
              el('code', {}, s.cron),
              s.timeZone,
              el('span', {}, el('span', { class: 'mono' }, s.job.kind), ` on ${s.job.queue}`),
              s.paused
                ? el('span', { class: 'muted' }, 'paused')
                : el(
                    'ol',
                    {},
                    ...(s.upcoming ?? (s.nextRunAt ? [s.nextRunAt] : [])).map((at) =>
                      el('li', {}, el('time', { datetime: at }, when(at))),
                    ),
                  ),
              when(s.lastSlotAt),
              misfireText(s.misfire),
              s.jitterMs > 0 ? `${duration(s.jitterMs)}${s.jitterMode ? ` (${s.jitterMode})` : ''}` : 'none',
              s.paused ? badge('paused') : badge('active', 'live'),
              admin
                ? el(
                    'span',
                    { class: 'actions' },
                    s.paused
                      ? el(
                          'button',
                          {
                            type: 'button',
                            'aria-label': `Resume schedule ${s.id}`,
                            onclick: act(`Schedule ${s.id} resumed`, `v1/schedules/${encodeURIComponent(s.id)}/resume`),
                          },
                          'Resume',
                        )
                      : el(
                          'button',
                          {
                            type: 'button',
                            'aria-label': `Pause schedule ${s.id}`,
                            onclick: act(`Schedule ${s.id} paused`, `v1/schedules/${encodeURIComponent(s.id)}/pause`),
                          },
                          'Pause',
                        ),
                    el(
                      'button',
                      {
                        type: 'button',
                        'aria-label': `Run now: schedule ${s.id}`,
                        onclick: act(
                          `Schedule ${s.id}: one run enqueued`,
                          `v1/schedules/${encodeURIComponent(s.id)}/run-now`,
                        ),
                      },
                      'Run now',
                    ),
                  )
                : '',
            ]),
          ),
    );
  };
  every(context, 5000, load);
}
