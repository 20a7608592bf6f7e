/**
 * One job: payload, state, run-at, every attempt with its error and time, the current lease
 * (owner, until, token), the schedule it came from and the timeline of its claims, from
 * GET /v1/jobs/{id}/detail. Refreshed every 2 s, so a job is seen going pending → running → done.
 */
import { get, post } from './api.js';
import { badge, el, replace, table } from './dom.js';
import { json, relative, when } from './format.js';
import type { JobJson } from './jobs-page.js';
import { can, every, type PageContext, report, status } from './page.js';

interface JobDetail {
  job: JobJson;
  lease: { owner: string; until: string | null; token: number; live: boolean } | null;
  schedule: { id: string; cron: string; timeZone: string } | null;
  attempts: {
    attempt: number;
    startedAt: string | null;
    endedAt: string | null;
    outcome: string;
    error: { message: string; kind?: string; detail?: string } | null;
    owner: string | null;
  }[];
  timeline: { at: string; event: string; attempt: number | null; detail: string | null }[];
}

/** Everything the page shows, in one call. */
function fetchDetail(id: string): Promise<JobDetail> {
  return get<JobDetail>(`v1/jobs/${id}/detail`);
}

function fields(pairs: [string, Node | string][]): HTMLDListElement {
  return el('dl', { class: 'fields' }, ...pairs.flatMap(([name, value]) => [el('dt', {}, name), el('dd', {}, value)]));
}

/** Draws the job page for job `id`. */
export async function renderJob(context: PageContext, id: string): Promise<void> {
  if (!/^\d{1,16}$/.test(id)) {
    replace(context.main, el('h1', {}, 'No such job'), el('p', {}, `"${id}" is not a job id.`));
    return;
  }
  const body = el('div');
  replace(context.main, el('p', {}, el('a', { href: '#/jobs' }, '← Jobs')), el('h1', {}, `Job ${id}`), body);
  const admin = can(context, 'admin');
  let lastDrawn = '';

  const draw = (detail: JobDetail) => {
    const { job } = detail;
    // Redraw only on change, so a keyboard user's focus is not lost every 2 s.
    const signature = JSON.stringify(detail);
    if (signature === lastDrawn) return;
    lastDrawn = signature;
    const actions: Node[] = [];
    if (admin && job.state === 'dead') {
      actions.push(
        el(
          'button',
          {
            type: 'button',
            class: 'primary',
            onclick: () => void act(() => post(`v1/dead-letters/${job.id}/retry`), 'retried'),
          },
          'Retry',
        ),
      );
    }
    if (admin && (job.state === 'pending' || job.state === 'running')) {
      actions.push(
        el(
          'button',
          {
            type: 'button',
            class: 'danger',
            onclick: () => void act(() => post(`v1/jobs/${job.id}/cancel`), 'cancelled'),
          },
          'Cancel',
        ),
      );
    }
    replace(
      body,
      el('div', { class: 'actions' }, badge(job.state), ...actions),
      el(
        'div',
        { class: 'grid' },
        el(
          'section',
          { class: 'panel', 'aria-labelledby': 'job-fields' },
          el('h2', { id: 'job-fields' }, 'Job'),
          fields([
            ['Kind', el('span', { class: 'mono' }, job.kind)],
            ['Queue', job.queue],
            ['State', el('span', { 'data-testid': 'job-state' }, job.state)],
            ['Run at', `${when(job.runAt)} (${relative(job.runAt)})`],
            ['Attempts', `${job.attempts} of ${job.maxAttempts}`],
            ['Priority', String(job.priority)],
            ['Created', when(job.createdAt)],
            ['Finished', when(job.finishedAt)],
            [
              'Schedule',
              detail.schedule
                ? el(
                    'span',
                    {},
                    el('a', { href: '#/schedules' }, detail.schedule.id),
                    detail.schedule.cron ? ` (${detail.schedule.cron}, ${detail.schedule.timeZone})` : '',
                    job.scheduleSlot ? `, slot ${when(job.scheduleSlot)}` : '',
                  )
                : 'none (one-off job)',
            ],
          ]),
        ),
        el(
          'section',
          { class: 'panel', 'aria-labelledby': 'job-lease' },
          el('h2', { id: 'job-lease' }, 'Lease'),
          detail.lease
            ? fields([
                ['Owner', el('span', { class: 'mono' }, detail.lease.owner)],
                ['Until', detail.lease.until ? `${when(detail.lease.until)} (${relative(detail.lease.until)})` : '–'],
                ['Token', String(detail.lease.token)],
                ['Live', detail.lease.live ? 'yes' : 'no (lapsed or finished)'],
              ])
            : el('p', { class: 'muted' }, 'Not leased.'),
        ),
      ),
      el(
        'section',
        { class: 'panel', 'aria-labelledby': 'job-payload' },
        el('h2', { id: 'job-payload' }, 'Payload'),
        el('pre', { 'data-testid': 'payload' }, json(job.payload)),
      ),
      el(
        'section',
        { 'aria-labelledby': 'job-attempts' },
        el('h2', { id: 'job-attempts' }, 'Attempts'),
        detail.attempts.length === 0
          ? el('p', { class: 'muted' }, 'Not claimed yet.')
          : table(
              'Attempts',
              ['#', 'Outcome', 'Started', 'Ended', 'Owner', 'Error'],
              detail.attempts.map((a) => [
                String(a.attempt),
                badge(a.outcome, a.outcome === 'done' ? 'done' : a.outcome === 'running' ? 'running' : 'failed'),
                when(a.startedAt),
                when(a.endedAt),
                el('span', { class: 'mono' }, a.owner ?? '–'),
                a.error
                  ? el(
                      'div',
                      {},
                      el('span', { class: 'mono' }, a.error.message),
                      a.error.detail
                        ? el('details', {}, el('summary', {}, 'Detail'), el('pre', {}, a.error.detail))
                        : null,
                    )
                  : '',
              ]),
              [0],
            ),
      ),
      el(
        'section',
        { 'aria-labelledby': 'job-timeline' },
        el('h2', { id: 'job-timeline' }, 'Timeline'),
        el(
          'ol',
          { class: 'panel' },
          ...detail.timeline.map((t) =>
            el(
              'li',
              {},
              el('time', { datetime: t.at }, when(t.at)),
              ` ${t.event}`,
              t.attempt === null ? '' : ` (attempt ${t.attempt})`,
              t.detail ? `: ${t.detail}` : '',
            ),
          ),
        ),
      ),
    );
  };

  const act = async (run: () => Promise<unknown>, past: string) => {
    try {
      await run();
      status(`Job ${id} ${past}`);
      draw(await fetchDetail(id));
    } catch (error) {
      report(context, error);
    }
  };

  draw(await fetchDetail(id));
  every(context, 2000, async () => draw(await fetchDetail(id)));
}
