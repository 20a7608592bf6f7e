/**
 * Small helpers the conformance suite shares: pinned instants, valid job specs, and a waiter for
 * events, so tests read as the behaviour they check rather than as setup.
 */
import type { JobSpec, SubmitInput } from '../../src/job/job-spec.js';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import type { RetryDecision } from '../../src/retry/backoff.js';
import type { Store } from '../../src/store/store.js';

/** A pinned instant `seconds` after the epoch, as the design's toy model counts time. */
export function t(seconds: number): Date {
  return new Date(seconds * 1000);
}

/** A validated job spec; jitter draws 0 so the spec is deterministic. */
export function spec(input: SubmitInput): JobSpec {
  return normalizeSubmit(input, () => 0);
}

/** Unique queue names, so tests sharing one database never see each other's jobs. */
export function queueNamer(prefix: string): () => string {
  let n = 0;
  return () => `${prefix}_${++n}`;
}

/** A retry decision with a fixed delay. */
export function retryIn(delayMs: number): RetryDecision {
  return { kind: 'retry', delayMs };
}

/** The park decision. */
export const PARK: RetryDecision = { kind: 'park' };

/** A handler error as a worker would report it. */
export function thrown(message: string): { message: string; kind: 'thrown'; detail?: string } {
  return { message, kind: 'thrown', detail: `Error: ${message}\n    at handler` };
}

/** Submits one job and returns its id, failing loudly if the store did not create it. */
export async function submitOne(store: Store, input: SubmitInput, now?: Date): Promise<string> {
  const [result] = await store.jobSubmit({ jobs: [spec(input)], now });
  if (!result?.created) throw new Error(`submit of ${JSON.stringify(input)} created no job: ${JSON.stringify(result)}`);
  return result.id;
}

/** Resolves as `promise` does, or rejects after `timeoutMs` naming what never happened. */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
