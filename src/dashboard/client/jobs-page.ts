/**
 * Jobs and Dead letters: one filter form (state, queue, kind, id range, run-at range, a payload
 * JSON path), keyset paging with the API's `next` cursor (never an offset), per-row actions, and
 * bulk actions on everything the filter matches (bulk.ts).
 */
import { ApiError, get, post, query } from './api.js';
import { type BulkAction, bulkPanel } from './bulk.js';
import { badge, el, field, replace, table } from './dom.js';
import { relative, when } from './format.js';
import { can, type PageContext, report, status } from './page.js';

/** A job as the API returns it (the fields the pages read). */
export interface JobJson {
  id: string;
  kind: string;
  queue: string;
  state: string;
  payload: unknown;
  priority: number;
  runAt: string;
  leaseUntil: string | null;
  leaseOwner: string | null;
  attempts: number;
  maxAttempts: number;
  errors: { attempt: number; at: string; message: string; kind?: string; detail?: string }[];
  scheduleId: string | null;
  scheduleSlot: string | null;
  createdAt: string;
  finishedAt: string | null;
}

/** The filter fields, as the API's query parameters name them (docs/dashboard-api.md). */
export const FILTER_FIELDS = ['state', 'queue', 'kind', 'idFrom', 'idTo', 'runAtFrom', 'runAtTo', 'payload'] as const;
type FilterField = (typeof FILTER_FIELDS)[number];
/** A filter: each field as text, absent when not set. */
export type Filter = Partial<Record<FilterField, string>>;

const JOB_STATES = ['pending', 'running', 'done', 'cancelled'] as const;

/** The filter in the hash's parameters. */
function filterOf(params: URLSearchParams, mode: 'jobs' | 'dead'): Filter {
  const filter: Filter = {};
  for (const name of FILTER_FIELDS) {
    const value = params.get(name)?.trim();
    if (value) filter[name] = value;
  }
  if (mode === 'dead') delete filter.state;
  return filter;
}

/** A datetime-local value (local time, no zone) as RFC 3339, or the text as typed when not one. */
function instantOf(value: string): string {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toISOString();
}

/** Draws the jobs (or dead-letter) list. */
export async function renderJobs(context: PageContext, mode: 'jobs' | 'dead'): Promise<void> {
  const filter = filterOf(context.params, mode);
  const order = context.params.get('order') === 'desc' ? 'desc' : 'asc';
  const listPath = mode === 'dead' ? 'v1/dead-letters' : 'v1/jobs';
  const admin = can(context, 'admin');

  const input = (name: FilterField, props: Record<string, string> = {}) =>
    el('input', { name, value: context.params.get(name) ?? '', ...props });
  const stateSelect = el(
    'select',
    { name: 'state' },
    el('option', { value: '' }, 'any'),
    ...JOB_STATES.map((s) => el('option', { value: s, selected: filter.state === s }, s)),
  );
  const orderSelect = el(
    'select',
    { name: 'order' },
    el('option', { value: 'asc', selected: order === 'asc' }, 'oldest first'),
    el('option', { value: 'desc', selected: order === 'desc' }, 'newest first'),
  );
  const form = el(
    'form',
    {
      class: 'filters panel',
      role: 'search',
      'aria-label': 'Filter jobs',
      onsubmit: (event: Event) => {
        event.preventDefault();
        const next = new URLSearchParams();
        for (const [name, value] of new FormData(form)) {
          const text = String(value).trim();
          // Empty fields and the default order stay out of the address.
          if (text === '' || (name === 'order' && text === 'asc')) continue;
          next.set(name, name === 'runAtFrom' || name === 'runAtTo' ? instantOf(text) : text);
        }
        location.hash = `#/${mode}${next.size === 0 ? '' : `?${next}`}`;
      },
    },
    mode === 'jobs' ? field('State', stateSelect) : null,
    field('Queue', input('queue', { placeholder: 'default' })),
    field('Kind', input('kind', { placeholder: 'send-receipt' })),
    field('Id from', input('idFrom', { inputmode: 'numeric', size: '8' })),
    field('Id to', input('idTo', { inputmode: 'numeric', size: '8' })),
    field('Run at from', input('runAtFrom', { placeholder: '2026-12-01T00:00:00Z' })),
    field('Run at to', input('runAtTo', { placeholder: '2026-12-02T00:00:00Z' })),
    field('Payload', input('payload', { placeholder: 'payload.customerId = 42', size: '24' })),
    field('Order', orderSelect),
    el('button', { type: 'submit', class: 'primary' }, 'Apply'),
    el('a', { href: `#/${mode}` }, 'Clear'),
  );

  const list = el('section', { 'aria-label': mode === 'dead' ? 'Dead letters' : 'Jobs', 'aria-live': 'polite' });
  const pager = el('div', { class: 'actions' });
  const actions: BulkAction[] = mode === 'dead' ? ['retry', 'purge'] : ['cancel', 'reschedule'];
  replace(
    context.main,
    el('h1', {}, mode === 'dead' ? 'Dead letters' : 'Jobs'),
    form,
    admin
      ? bulkPanel(context, actions, filter, () => void load(cursor))
      : el('p', { class: 'muted' }, 'Read-only token: actions are hidden.'),
    list,
    pager,
  );

  // Keyset paging: the cursors of the pages before this one, so "Previous" needs no offset.
  const before: (string | undefined)[] = [];
  let cursor: string | undefined;
  const load = async (after: string | undefined) => {
    const page = await get<{ jobs: JobJson[]; next: string | null; searchedThrough?: string }>(
      `${listPath}${query({ ...filter, order: order === 'desc' ? 'desc' : undefined, limit: 50, after })}`,
    );
    cursor = after;
    drawList(page.jobs);
    replace(
      pager,
      el(
        'button',
        {
          type: 'button',
          disabled: before.length === 0,
          onclick: () => {
            void load(before.pop()).catch((error) => report(context, error));
          },
        },
        '← Previous',
      ),
      el(
        'button',
        {
          type: 'button',
          disabled: page.next === null,
          onclick: () => {
            before.push(cursor);
            void load(page.next ?? undefined).catch((error) => report(context, error));
          },
        },
        'Next →',
      ),
      el(
        'span',
        { class: 'muted', 'data-testid': 'shown' },
        // A payload search reads a bounded span of ids per page; say where it stopped.
        page.searchedThrough === undefined
          ? `${page.jobs.length} shown`
          : `${page.jobs.length} shown; searched through id ${page.searchedThrough}, Next searches further`,
      ),
    );
  };

  const act = async (label: string, run: () => Promise<unknown>) => {
    try {
      await run();
      status(label);
      await load(cursor);
    } catch (error) {
      report(context, error);
    }
  };

  const drawList = (jobs: JobJson[]) => {
    if (jobs.length === 0) {
      replace(list, el('p', { class: 'muted', 'data-testid': 'empty' }, 'No jobs match this filter.'));
      return;
    }
    const rows = jobs.map((job) => {
      const lastError = job.errors.at(-1);
      const rowActions: Node[] = [];
      if (admin && mode === 'dead') {
        rowActions.push(
          el(
            'button',
            {
              type: 'button',
              'aria-label': `Retry job ${job.id}`,
              onclick: () => void act(`Job ${job.id} retried`, () => post(`v1/dead-letters/${job.id}/retry`)),
            },
            'Retry',
          ),
          el(
            'button',
            {
              type: 'button',
              class: 'danger',
              'aria-label': `Purge job ${job.id}`,
              onclick: () => {
                if (confirm(`Purge dead letter ${job.id}? It is deleted for good.`))
                  void act(`Job ${job.id} purged`, () => post('v1/dead-letters/purge', { ids: [job.id] }));
              },
            },
            'Purge',
          ),
        );
      }
      if (admin && mode === 'jobs' && (job.state === 'pending' || job.state === 'running')) {
        rowActions.push(
          el(
            'button',
            {
              type: 'button',
              'aria-label': `Cancel job ${job.id}`,
              onclick: () => void act(`Job ${job.id} cancelled`, () => post(`v1/jobs/${job.id}/cancel`)),
            },
            'Cancel',
          ),
        );
      }
      return [
        el('a', { href: `#/jobs/${job.id}` }, job.id),
        el('span', { class: 'mono' }, job.kind),
        job.queue,
        badge(job.state),
        el('span', { title: job.runAt }, when(job.runAt), ' ', el('span', { class: 'muted' }, relative(job.runAt))),
        `${job.attempts}/${job.maxAttempts}`,
        lastError ? el('span', { class: 'mono' }, lastError.message.slice(0, 140)) : '',
        el('span', { class: 'actions' }, ...rowActions),
      ];
    });
    replace(
      list,
      table(
        mode === 'dead' ? 'Dead letters' : 'Jobs',
        ['Id', 'Kind', 'Queue', 'State', 'Run at', 'Attempts', 'Last error', admin ? 'Actions' : ''],
        rows,
        [0],
      ),
    );
  };

  try {
    await load(undefined);
  } catch (error) {
    if (error instanceof ApiError && error.status === 400) {
      replace(
        list,
        el('p', { class: 'error', role: 'alert' }, `${error.field ? `${error.field}: ` : ''}${error.message}`),
      );
      return;
    }
    throw error;
  }
}
