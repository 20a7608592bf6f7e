/**
 * Wake-ups that name their jobs' queue and kind, and who they concern. Pure: no I/O.
 *
 * A PostgreSQL NOTIFY reaches every listening process, whatever it claims. When its payload said
 * only a run time, a submit woke the workers of every other service sharing the database (other
 * kinds, other queues) and each sent a claim that could find nothing: with three idle workers of
 * another kind beside one stream of 1,000 single submits/s, each of them claimed about 2,100
 * times in 10 s and the stream's own start p99 rose from 21 to 98-132 ms on this 2-core machine
 * (bench/start-latency-stages.ts --idle-workers 3). A payload naming the queue and kind lets those
 * workers ignore it without a round trip (decision 0025).
 *
 * SQLite has no NOTIFY, but its wake-ups follow the same rule ({@link wakeUpsFor}): a process's own
 * submits, and other processes' submits its store sees in the file, name their queue and kind.
 *
 * Payloads: `[runAtMs, "queue", "kind"]` (JSON) names one queue and kind; a bare number of epoch
 * ms, as every earlier release sent, names none; anything else (an empty payload, a queue resume)
 * is "look again" for everyone. Earlier releases read a named payload as "look again", so during
 * a rolling deploy their workers claim once more than they need to, never less.
 */
import type { WakeUp } from './store.js';

/**
 * Most (queue, kind) groups one write's wake-ups name one by one; a write whose jobs span more
 * sends a single wake-up naming neither (every worker looks), so a batch of many kinds never
 * costs a NOTIFY per kind. PostgreSQL's statements apply it in SQL (wakeNotify in
 * postgres/sql-fragments.ts), SQLite's through {@link wakeUpsFor}.
 */
export const MAX_NAMED_WAKE_UPS = 8;

/** New jobs of one queue and kind, and the earliest run time among them (epoch ms). */
export interface WakeUpGroup {
  queue: string;
  kind: string;
  runAtMs: number;
}

/**
 * The wake-ups for a write's new jobs (groups may repeat a queue and kind): one per queue and kind
 * with its earliest run time, or, past {@link MAX_NAMED_WAKE_UPS} of them, one naming neither
 * with the earliest of all. Whether a wake-up is due soon enough to send is the caller's rule.
 */
export function wakeUpsFor(groups: Iterable<WakeUpGroup>): WakeUp[] {
  // Queue, then kind: no key string built per job (a SQLite submit calls this for every batch).
  const earliest = new Map<string, Map<string, WakeUpGroup>>();
  const named: WakeUpGroup[] = [];
  let first: number | null = null;
  for (const group of groups) {
    let ofQueue = earliest.get(group.queue);
    if (!ofQueue) {
      ofQueue = new Map();
      earliest.set(group.queue, ofQueue);
    }
    const seen = ofQueue.get(group.kind);
    if (!seen) named.push(group);
    if (!seen || group.runAtMs < seen.runAtMs) ofQueue.set(group.kind, group);
    if (first === null || group.runAtMs < first) first = group.runAtMs;
  }
  if (first === null) return [];
  if (named.length > MAX_NAMED_WAKE_UPS) return [{ runAt: new Date(first) }];
  return named.map(({ queue, kind }) => {
    const { runAtMs } = earliest.get(queue)!.get(kind)!;
    return { runAt: new Date(runAtMs), queue, kind };
  });
}

/** Reads a NOTIFY payload; never throws (a hint that cannot be read is "look again"). */
export function parseWakeUpPayload(payload: string | undefined): WakeUp {
  if (!payload) return { runAt: null };
  if (payload.startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      return { runAt: null };
    }
    if (!Array.isArray(parsed) || parsed.length !== 3) return { runAt: null };
    const [ms, queue, kind] = parsed as unknown[];
    if (typeof queue !== 'string' || typeof kind !== 'string') return { runAt: null };
    return { runAt: typeof ms === 'number' && Number.isFinite(ms) ? new Date(ms) : null, queue, kind };
  }
  const ms = Number(payload);
  return { runAt: Number.isFinite(ms) ? new Date(ms) : null };
}

/**
 * Whether a wake-up may concern a claimer of these queues and kinds (undefined or null: every
 * queue, every kind). Only a wake-up that names a queue or kind the claimer never claims is
 * ignored; one naming nothing concerns everyone.
 */
export function wakeUpConcerns(
  wakeUp: WakeUp,
  queues: readonly string[] | null | undefined,
  kinds: readonly string[] | null | undefined,
): boolean {
  if (wakeUp.queue !== undefined && queues && !queues.includes(wakeUp.queue)) return false;
  if (wakeUp.kind !== undefined && kinds && !kinds.includes(wakeUp.kind)) return false;
  return true;
}
