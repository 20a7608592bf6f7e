/**
 * The demo's job kinds and their handlers, shared by the demo process and its child workers.
 * The handlers only wait: the story is about leases and fencing, not about the work.
 */
import type { Docket } from '../../docket.js';
import type { DemoSettings } from './demo-settings.js';

/** Job kinds the demo submits. */
export const DEMO_KINDS = {
  long: 'demo.long-report',
  report: 'demo.report',
  flaky: 'demo.flaky-webhook',
} as const;

/** The queue names of one demo run. */
export interface DemoQueues {
  main: string;
  stall: string;
  poison: string;
}

/** Queues the demo uses: one per part of the story, so each worker takes only its part's jobs. */
export const DEMO_QUEUES: DemoQueues = Object.freeze({ main: 'main', stall: 'stall', poison: 'poison' });

/** The error the flaky handler always throws. */
export const FLAKY_ERROR = 'upstream answered 503 Service Unavailable';

/** Resolves after `ms`; deliberately ignores abort signals, like a side effect already under way. */
function work(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Registers the demo's handlers on `docket`. */
export function registerDemoHandlers(docket: Docket, settings: DemoSettings): void {
  docket.handle(DEMO_KINDS.long, () => work(settings.longJobMs));
  docket.handle(DEMO_KINDS.report, () => work(settings.reportJobMs));
  docket.handle(DEMO_KINDS.flaky, () => {
    throw new Error(FLAKY_ERROR);
  });
}
