/**
 * What every page is given: where to draw, its route parameters, what the token may do, and
 * a signal that aborts when the operator leaves the page (its timers and streams stop).
 */
import type { Principal } from './api.js';

/** A page's context. */
export interface PageContext {
  main: HTMLElement;
  /** The path after `#/`, split on `/` (e.g. `['jobs', '42']`). */
  path: string[];
  /** The hash's query parameters (filters live there, so a reload keeps them). */
  params: URLSearchParams;
  principal: Principal;
  signal: AbortSignal;
  /** Rewrites the hash's query without adding a history entry per keystroke. */
  setParams(params: URLSearchParams): void;
}

/** True when the token has `scope`: actions it lacks are not shown (the API refuses them anyway). */
export function can(context: PageContext, scope: 'admin' | 'read' | 'submit'): boolean {
  return context.principal.scopes.includes(scope);
}

/** Runs `tick` now and every `ms` until the page is left; errors are shown, not thrown. */
export function every(context: PageContext, ms: number, tick: () => Promise<void>): void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const run = async () => {
    try {
      await tick();
    } catch (error) {
      report(context, error);
    }
    if (!context.signal.aborted) timer = setTimeout(run, ms);
  };
  context.signal.addEventListener('abort', () => clearTimeout(timer));
  void run();
}

/** Shows an error in the status line (kept short; the API's message names the field). */
export function report(context: PageContext, error: unknown): void {
  if (context.signal.aborted) return;
  const live = document.getElementById('live');
  if (live) live.textContent = `Error: ${(error as Error).message}`;
}

/** Shows a short status (live updates, last refresh) in the header. */
export function status(text: string): void {
  const live = document.getElementById('live');
  if (live) live.textContent = text;
}
