/**
 * Bulk actions on a filter, not a page: the server counts what the filter matches (the
 * preview), the operator confirms that count, and the server walks the matches in bounded
 * batches (POST /v1/bulk) while the page shows its progress from the event stream.
 *
 * Safe after a reload: the operation runs on the server, not in the page. Its id is kept in
 * sessionStorage (until its result is dismissed), so a reloaded page finds it (GET /v1/bulk/{id})
 * and shows its progress or its result; starting the same operation again joins the running one or, once it is finished, finds
 * nothing left to change (retried, purged and cancelled jobs no longer match).
 */
import { ApiError, get, post } from './api.js';
import { el, field, replace } from './dom.js';
import { duration } from './format.js';
import type { Filter } from './jobs-page.js';
import { follow } from './live.js';
import type { PageContext } from './page.js';
import { report } from './page.js';

/** The bulk actions of docs/dashboard-api.md. */
export type BulkAction = 'retry' | 'purge' | 'cancel' | 'reschedule';

/** An operation as GET /v1/bulk/{id} returns it. */
export interface Operation {
  id: string;
  action: BulkAction;
  state: 'running' | 'done' | 'failed';
  total: number;
  totalEstimated?: boolean;
  done: number;
  affected: number;
  startedAt: string;
  finishedAt: string | null;
  error: string | null;
}

const LABELS: Record<BulkAction, { verb: string; past: string; what: string }> = {
  retry: { verb: 'Retry', past: 'retried', what: 'dead letters' },
  purge: { verb: 'Purge', past: 'purged', what: 'dead letters' },
  cancel: { verb: 'Cancel', past: 'cancelled', what: 'pending or running jobs' },
  reschedule: { verb: 'Reschedule', past: 'rescheduled', what: 'pending jobs' },
};

const OPERATION_KEY = 'docket.dashboard.bulk';

function rememberOperation(page: string, id: string | null): void {
  try {
    if (id === null) sessionStorage.removeItem(`${OPERATION_KEY}.${page}`);
    else sessionStorage.setItem(`${OPERATION_KEY}.${page}`, id);
  } catch {
    // Storage blocked: a reload then simply shows no progress (the operation still runs).
  }
}

function rememberedOperation(page: string): string | null {
  try {
    return sessionStorage.getItem(`${OPERATION_KEY}.${page}`);
  } catch {
    return null;
  }
}

/** The bulk-action panel for `filter`; `onFinished` refreshes the list when an operation ends. */
export function bulkPanel(
  context: PageContext,
  actions: readonly BulkAction[],
  filter: Filter,
  onFinished: () => void,
): HTMLElement {
  const page = context.path[0] ?? 'jobs';
  const actionSelect = el(
    'select',
    { name: 'bulk-action' },
    ...actions.map((a) => el('option', { value: a }, `${LABELS[a].verb} ${LABELS[a].what}`)),
  );
  const runAtInput = el('input', { type: 'datetime-local', name: 'bulk-run-at', step: '1' });
  const runAtField = field('New run time (reschedule)', runAtInput);
  const progressArea = el('div', { 'aria-live': 'polite' });
  const dialogTitle = el('h2', { id: 'bulk-dialog-title' });
  const dialogText = el('p', { id: 'bulk-dialog-text' });
  const confirmButton = el('button', { type: 'button', class: 'primary', value: 'confirm' }, 'Confirm');
  const dialog = el(
    'dialog',
    { 'aria-labelledby': 'bulk-dialog-title', 'aria-describedby': 'bulk-dialog-text' },
    dialogTitle,
    dialogText,
    el(
      'div',
      { class: 'actions' },
      confirmButton,
      el('button', { type: 'button', onclick: () => dialog.close() }, 'Keep them'),
    ),
  );
  let watching: string | undefined;

  const showOperation = (op: Operation) => {
    const label = LABELS[op.action];
    const fraction = op.total === 0 ? 1 : Math.min(op.done / op.total, 1);
    const percent = op.state === 'done' ? 100 : Math.floor(fraction * 100);
    const finished = op.state !== 'running';
    const tookMs = op.finishedAt === null ? null : Date.parse(op.finishedAt) - Date.parse(op.startedAt);
    replace(
      progressArea,
      el(
        'div',
        { class: 'panel', 'data-operation': op.id, 'data-state': op.state },
        el(
          'label',
          {},
          `${label.verb}: ${op.done.toLocaleString()} of ${op.totalEstimated ? '≈' : ''}${op.total.toLocaleString()} processed`,
          el('progress', { max: 100, value: percent, 'aria-valuetext': `${percent} %` }),
        ),
        el('p', { class: 'progress-percent' }, `${percent} %`),
        finished
          ? el(
              'p',
              {
                class: op.state === 'failed' ? 'error' : 'notice',
                role: op.state === 'failed' ? 'alert' : 'status',
                'data-testid': 'bulk-summary',
              },
              op.state === 'failed'
                ? `Stopped after ${op.affected.toLocaleString()} ${label.past}: ${op.error ?? 'unknown error'}`
                : `Done: ${op.affected.toLocaleString()} ${label.what} ${label.past} in ${duration(tookMs)}` +
                    (op.affected < op.done
                      ? ` (${(op.done - op.affected).toLocaleString()} had changed meanwhile and were left alone)`
                      : '') +
                    '.',
            )
          : null,
      ),
    );
    if (finished) {
      // The result stays remembered, so a reload still shows it, until dismissed.
      progressArea.querySelector('[data-operation]')?.appendChild(
        el(
          'button',
          {
            type: 'button',
            onclick: () => {
              rememberOperation(page, null);
              replace(progressArea);
            },
          },
          'Dismiss',
        ),
      );
    }
    if (finished && watching === op.id) {
      watching = undefined;
      onFinished();
    }
  };

  const watch = (op: Operation) => {
    watching = op.id;
    rememberOperation(page, op.id);
    showOperation(op);
    // The stream reports each batch; the poll covers a stream a proxy holds back.
    follow(
      context,
      {
        bulk: (data) => {
          const event = data as Operation;
          if (event.id === watching) showOperation(event);
        },
      },
      async () => {
        if (watching === undefined) return;
        showOperation(await get<Operation>(`v1/bulk/${encodeURIComponent(watching)}`));
      },
      1000,
    );
  };

  const start = async () => {
    const action = actionSelect.value as BulkAction;
    const body: Record<string, unknown> = { action, filter };
    if (action === 'reschedule') {
      const date = new Date(runAtInput.value);
      if (runAtInput.value === '' || Number.isNaN(date.getTime())) {
        report(context, new Error('give the new run time to reschedule to'));
        runAtInput.focus();
        return;
      }
      body.runAt = date.toISOString();
    }
    const preview = await post<{ matched: number; estimated: boolean }>('v1/bulk/preview', { action, filter });
    const label = LABELS[action];
    dialogTitle.textContent = `${label.verb} ${preview.estimated ? 'about ' : ''}${preview.matched.toLocaleString()} ${label.what}?`;
    dialogText.textContent =
      preview.matched === 0
        ? 'Nothing matches this filter now.'
        : `Every one of the ${preview.estimated ? '≈' : ''}${preview.matched.toLocaleString()} ${label.what} this filter matches will be ${label.past}` +
          (action === 'reschedule' ? ` to run at ${new Date(body.runAt as string).toLocaleString()}` : '') +
          (action === 'purge' ? '. Purged jobs are deleted for good.' : '.');
    confirmButton.disabled = preview.matched === 0;
    confirmButton.textContent = `${label.verb} ${preview.matched.toLocaleString()}`;
    confirmButton.onclick = async () => {
      dialog.close();
      try {
        watch(await post<Operation>('v1/bulk', body));
      } catch (error) {
        report(context, error);
      }
    };
    dialog.showModal();
    confirmButton.focus();
  };

  const syncRunAt = () => {
    runAtField.hidden = actionSelect.value !== 'reschedule';
  };
  actionSelect.addEventListener('change', syncRunAt);
  syncRunAt();

  const remembered = rememberedOperation(page);
  if (remembered !== null) {
    get<Operation>(`v1/bulk/${encodeURIComponent(remembered)}`)
      .then((op) => {
        if (op.state === 'running') return watch(op);
        showOperation(op);
      })
      .catch((error: unknown) => {
        // A restarted server forgets its operations: nothing to show.
        if (error instanceof ApiError && error.status === 404) rememberOperation(page, null);
        else report(context, error);
      });
  }

  return el(
    'section',
    { class: 'panel', 'aria-labelledby': 'bulk-title' },
    el('h2', { id: 'bulk-title' }, 'Bulk actions'),
    el('p', { class: 'muted' }, 'Applies to every job the filter above matches, not only this page.'),
    el(
      'div',
      { class: 'actions' },
      field('Action', actionSelect),
      runAtField,
      el(
        'button',
        {
          type: 'button',
          class: 'primary',
          onclick: () => {
            void start().catch((error) => report(context, error));
          },
        },
        'Select all matching…',
      ),
    ),
    progressArea,
    dialog,
  );
}
