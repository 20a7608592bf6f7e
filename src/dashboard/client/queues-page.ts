/** Queues: every queue with its counts, paused ones marked, pause and resume for an admin token. */
import { get, post } from './api.js';
import { format } from './chart.js';
import { badge, el, replace, table } from './dom.js';
import { when } from './format.js';
import { fetchOverview } from './overview-page.js';
import { can, every, type PageContext, report, status } from './page.js';

/** Draws the queues page. */
export async function renderQueues(context: PageContext): Promise<void> {
  const list = el('section', { 'aria-label': 'Queues', 'aria-live': 'polite' });
  replace(context.main, el('h1', {}, 'Queues'), list);
  const admin = can(context, 'admin');
  let lastDrawn = '';
  const load = async () => {
    const [overview, states] = await Promise.all([
      fetchOverview(),
      get<{ queues: { name: string; paused: boolean; pausedAt: string | null }[] }>('v1/queues'),
    ]);
    const pausedAt = new Map(states.queues.map((q) => [q.name, q]));
    const names = [...new Set([...overview.queues.map((q) => q.queue), ...states.queues.map((q) => q.name)])].sort();
    const rows = names.map((name) => {
      const counts = overview.queues.find((q) => q.queue === name);
      const state = pausedAt.get(name);
      const paused = state?.paused ?? counts?.paused ?? false;
      return { name, paused, pausedAt: state?.pausedAt ?? null, counts };
    });
    const signature = JSON.stringify(rows);
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
      rows.length === 0
        ? el('p', { class: 'muted' }, 'No queues yet: a queue exists once a job names it.')
        : table(
            'Queues',
            ['Queue', 'Status', 'Available', 'Running', 'Scheduled', 'Dead', admin ? 'Actions' : ''],
            rows.map((q) => [
              el('a', { href: `#/jobs?queue=${encodeURIComponent(q.name)}` }, q.name),
              q.paused
                ? el('span', {}, badge('paused'), q.pausedAt ? ` since ${when(q.pausedAt)}` : '')
                : badge('active', 'live'),
              format(q.counts?.available ?? 0),
              format(q.counts?.running ?? 0),
              format(q.counts?.scheduled ?? 0),
              format(q.counts?.dead ?? 0),
              admin
                ? q.paused
                  ? el(
                      'button',
                      {
                        type: 'button',
                        'aria-label': `Resume queue ${q.name}`,
                        onclick: act(`Queue ${q.name} resumed`, `v1/queues/${encodeURIComponent(q.name)}/resume`),
                      },
                      'Resume',
                    )
                  : el(
                      'button',
                      {
                        type: 'button',
                        class: 'danger',
                        'aria-label': `Pause queue ${q.name}`,
                        onclick: act(`Queue ${q.name} paused`, `v1/queues/${encodeURIComponent(q.name)}/pause`),
                      },
                      'Pause',
                    )
                : '',
            ]),
            [2, 3, 4, 5],
          ),
    );
  };
  every(context, 3000, load);
}
