/**
 * The live feed: GET /v1/events read with fetch() streaming (the token in the Authorization
 * header), reconnecting with a capped, jittered backoff; while the stream is down, the page
 * still refreshes by polling, so a proxy that buffers event streams only costs latency.
 */
import { ApiError, stream } from './api.js';
import type { PageContext } from './page.js';
import { status } from './page.js';

/** Handlers of the stream's events, by event name (`overview`, `bulk`). */
export type LiveHandlers = Partial<Record<'overview' | 'bulk', (data: unknown) => void>>;

/**
 * Follows the event stream until the page is left. `poll` runs every `pollMs` while the stream
 * is not connected (and once at start), so the page is never stale for long.
 */
export function follow(context: PageContext, handlers: LiveHandlers, poll: () => Promise<void>, pollMs = 5000): void {
  let connected = false;
  let failures = 0;
  let pollTimer: ReturnType<typeof setTimeout> | undefined;
  const controller = new AbortController();
  context.signal.addEventListener('abort', () => {
    controller.abort();
    clearTimeout(pollTimer);
  });
  const pollLoop = async () => {
    if (!connected) {
      try {
        await poll();
      } catch (error) {
        status(`Error: ${(error as Error).message}`);
      }
    }
    if (!context.signal.aborted) pollTimer = setTimeout(pollLoop, pollMs);
  };
  void pollLoop();
  const connect = async () => {
    while (!context.signal.aborted) {
      try {
        await stream(
          'v1/events',
          (event) => {
            if (!connected) status('Live');
            connected = true;
            failures = 0;
            const handler = handlers[event.event as keyof LiveHandlers];
            if (handler) handler(JSON.parse(event.data));
          },
          controller.signal,
        );
      } catch (error) {
        if (context.signal.aborted) return;
        // A refused stream (a token revoked meanwhile) is not retried; the polls report the error.
        if (error instanceof ApiError && error.status >= 400 && error.status < 500) return;
      }
      connected = false;
      if (context.signal.aborted) return;
      status('Reconnecting…');
      failures++;
      const delayMs = Math.min(15_000, 500 * 2 ** Math.min(failures, 5)) * (0.5 + Math.random() / 2);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  };
  void connect();
}
