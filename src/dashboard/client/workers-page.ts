/** Workers: the live registry (host, pid, queues, kinds, concurrency, last seen). */
import { get } from './api.js';
import { el, replace, table } from './dom.js';
import { relative, when } from './format.js';
import { every, type PageContext } from './page.js';

interface WorkerJson {
  id: string;
  origin: string;
  host: string;
  pid: number;
  version: string;
  queues: string[] | null;
  kinds: string[] | null;
  excludeKinds: string[] | null;
  concurrency: number;
  startedAt: string;
  lastSeenAt: string;
  expiresAt: string;
}

const list = (items: string[] | null, all: string) => (items === null || items.length === 0 ? all : items.join(', '));

/** Draws the workers page. */
export async function renderWorkers(context: PageContext): Promise<void> {
  const section = el('section', { 'aria-label': 'Workers', 'aria-live': 'polite' });
  replace(context.main, el('h1', {}, 'Workers'), section);
  every(context, 3000, async () => {
    const { workers } = await get<{ workers: WorkerJson[] }>('v1/workers');
    replace(
      section,
      workers.length === 0
        ? el('p', { class: 'muted' }, 'No live worker is registered.')
        : table(
            'Workers',
            ['Id', 'Host', 'Pid', 'Origin', 'Queues', 'Kinds', 'Concurrency', 'Started', 'Last seen'],
            workers.map((w) => [
              el('span', { class: 'mono' }, w.id),
              w.host,
              String(w.pid),
              w.origin,
              list(w.queues, 'all'),
              w.excludeKinds && w.excludeKinds.length > 0
                ? `${list(w.kinds, 'all')} except ${w.excludeKinds.join(', ')}`
                : list(w.kinds, 'all'),
              String(w.concurrency),
              when(w.startedAt),
              el('time', { datetime: w.lastSeenAt, title: when(w.lastSeenAt) }, relative(w.lastSeenAt)),
            ]),
            [2, 6],
          ),
    );
  });
}
