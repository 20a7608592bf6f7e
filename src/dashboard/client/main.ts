/**
 * The dashboard's entry module: navigation, the token prompt and the hash router. Routes live
 * in the hash (`#/jobs?state=dead`), so filters survive a reload and the server serves one page.
 */
import { ApiError, type Principal, storeToken, TokenNeededError, whoami } from './api.js';
import { el, field, replace } from './dom.js';
import { renderJob } from './job-page.js';
import { renderJobs } from './jobs-page.js';
import { renderOverview } from './overview-page.js';
import type { PageContext } from './page.js';
import { renderQueues } from './queues-page.js';
import { renderSchedules } from './schedules-page.js';
import { renderWorkers } from './workers-page.js';

const PAGES = [
  { route: 'overview', title: 'Overview' },
  { route: 'jobs', title: 'Jobs' },
  { route: 'dead', title: 'Dead letters' },
  { route: 'schedules', title: 'Schedules' },
  { route: 'queues', title: 'Queues' },
  { route: 'workers', title: 'Workers' },
] as const;

const main = document.getElementById('main') as HTMLElement;
let principal: Principal | undefined;
let leave: AbortController | undefined;

function parseHash(): { path: string[]; params: URLSearchParams } {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = hash.split('?', 2);
  const parts = path.split('/').filter((part) => part !== '');
  return { path: parts.length === 0 ? ['overview'] : parts, params: new URLSearchParams(search) };
}

function drawNav(current: string): void {
  const nav = document.getElementById('nav') as HTMLElement;
  replace(
    nav,
    el(
      'ul',
      {},
      ...PAGES.map((page) =>
        el(
          'li',
          {},
          el('a', { href: `#/${page.route}`, 'aria-current': page.route === current ? 'page' : null }, page.title),
        ),
      ),
    ),
  );
}

/** Asks for a token (the server has tokens and this tab holds none, or a refused one). */
function askToken(reason: string): void {
  drawNav('');
  const input = el('input', {
    type: 'password',
    name: 'token',
    autocomplete: 'off',
    required: true,
    id: 'token-input',
  });
  const form = el(
    'form',
    {
      class: 'panel',
      onsubmit: (event: Event) => {
        event.preventDefault();
        storeToken(input.value.trim());
        void route();
      },
    },
    el('h1', {}, 'Sign in'),
    el('p', {}, reason),
    el(
      'p',
      { class: 'muted' },
      'The token is kept in this tab only (sessionStorage) and sent as an Authorization header.',
    ),
    field('API token', input),
    el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'primary' }, 'Use token')),
  );
  replace(main, form);
  input.focus();
}

async function route(): Promise<void> {
  leave?.abort();
  leave = new AbortController();
  const { path, params } = parseHash();
  try {
    principal ??= await whoami();
  } catch (error) {
    if (error instanceof TokenNeededError) {
      principal = undefined;
      askToken('This server needs an API token (any token with the read scope shows everything).');
      return;
    }
    replace(main, el('p', { class: 'error', role: 'alert' }, `The API does not answer: ${(error as Error).message}`));
    return;
  }
  const current = path[0] ?? 'overview';
  drawNav(current);
  const signedIn = document.getElementById('who');
  if (signedIn) signedIn.remove();
  if (principal.authenticated) {
    document.querySelector('.top')?.appendChild(
      el(
        'span',
        { id: 'who', class: 'muted' },
        `${principal.name} (${principal.scopes.join(', ')}) `,
        el(
          'button',
          {
            type: 'button',
            onclick: () => {
              storeToken(null);
              principal = undefined;
              void route();
            },
          },
          'Sign out',
        ),
      ),
    );
  }
  const context: PageContext = {
    main,
    path,
    params,
    principal,
    signal: leave.signal,
    setParams: (next) => {
      const text = next.toString();
      history.replaceState(null, '', `#/${path.join('/')}${text === '' ? '' : `?${text}`}`);
    },
  };
  replace(main);
  const title = PAGES.find((page) => page.route === current)?.title ?? 'Docket';
  document.title = `${title} · Docket`;
  try {
    if (current === 'overview') await renderOverview(context);
    else if (current === 'jobs' && path[1] !== undefined) await renderJob(context, path[1]);
    else if (current === 'jobs') await renderJobs(context, 'jobs');
    else if (current === 'dead') await renderJobs(context, 'dead');
    else if (current === 'schedules') await renderSchedules(context);
    else if (current === 'queues') await renderQueues(context);
    else if (current === 'workers') await renderWorkers(context);
    else replace(main, el('h1', {}, 'Not found'), el('p', {}, el('a', { href: '#/overview' }, 'Go to the overview')));
  } catch (error) {
    if (error instanceof TokenNeededError) {
      principal = undefined;
      askToken('The token was refused; give another one.');
      return;
    }
    const message = error instanceof ApiError ? `${error.message} (${error.code})` : (error as Error).message;
    main.appendChild(el('p', { class: 'error', role: 'alert' }, message));
  }
}

window.addEventListener('hashchange', () => {
  void route();
  main.focus();
});
void route();
