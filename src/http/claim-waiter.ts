/**
 * Long polling for remote claims. A claim that finds nothing waits until it is told a job may be
 * due for it, or its poll interval passes, then tries again, until its wait runs out. One store
 * subscription serves every waiting request, so a thousand idle workers cost one listener, not a
 * thousand. Hints can be lost, which is why the poll interval still bounds every wait.
 *
 * Waiting claims are grouped by what they ask for (queues and kinds). A wake-up wakes one claim
 * per group, the longest waiting, not all of them: its claim is told to pass the wake-up on when
 * it came back full (more may be due) or never ran (its client left, the store failed), so a batch
 * of due jobs still reaches as many workers as it needs, one claim after another. Waking every
 * waiting claim made each submit cost every idle worker a claim, a next-run-at read and a clock
 * read that could all find nothing: with sixteen workers waiting, seventeen commits a job.
 *
 * A hint that names a queue or kind a group never claims passes that group by (store/wake-up.ts).
 * A hint naming a later run time wakes nobody: it sets the group's timer for that time (only
 * ever earlier), and the timer wakes one claim as a hint would. The next run time a claim read
 * before waiting goes to the same timer, so the claims of one group never all wake for one job.
 */
import type { Store, WakeUp } from '../store/store.js';
import { wakeUpConcerns } from '../store/wake-up.js';

/** A hint due within this margin of the database's estimated now counts as due now. */
const DUE_MARGIN_MS = 2;
/**
 * A next run time already past when read means another claim holds that job (SKIP LOCKED):
 * look again this soon rather than spin on it. Also bounds the wait of a claim that missed the
 * hint of a job committed between its empty claim and its wait.
 */
const RECHECK_DUE_MS = 20;

/**
 * Why a wait ended: `hint` when woken as its group's claim for a job a hint said is due now,
 * `due` when woken by the group's timer (a job known to fall due now), `timer` for anything else
 * (its poll or recheck interval, its deadline, its client leaving, the waiter closing). After a
 * `hint` or `due` wake the caller claims and then calls {@link ClaimWaiter.passOn} or, for a
 * `due` claim that came back short but not empty, {@link ClaimWaiter.nextDue}.
 */
export type WaitEnd = 'hint' | 'due' | 'timer';

/** One waiting claim. */
interface Wait {
  group: WaitGroup;
  timer: NodeJS.Timeout;
  end: (how: WaitEnd) => void;
}

/** The waiting claims that ask for the same queues and kinds, oldest first. */
interface WaitGroup {
  key: string;
  /** The queues and kinds its claims ask for (null: all), read back from the key. */
  queues: readonly string[] | null;
  kinds: readonly string[] | null;
  waits: Set<Wait>;
  /** When the group's earliest known future job falls due (server clock, epoch ms). */
  dueAtMs: number;
  dueTimer: NodeJS.Timeout | undefined;
}

/** Shares one store subscription among all waiting claims. */
export class ClaimWaiter {
  private readonly groups = new Map<string, WaitGroup>();
  private unsubscribe: Promise<() => Promise<void>> | null = null;
  private isClosed = false;
  /**
   * The database clock minus the server's, from the latest `dbNowMs` a wait was given and when it
   * was read. Not from when the wait starts: a wait starting a few ms after the read (a busy event
   * loop) would take the database to be that much behind, and wake that much late for a job due now.
   */
  private dbOffsetMs = 0;

  constructor(
    private readonly store: Store,
    private readonly pollIntervalMs: number,
  ) {}

  /** The group key of a claim filter: the same queues and kinds in any order share a group. */
  static groupKey(queues: readonly string[] | undefined, kinds: readonly string[] | undefined): string {
    return JSON.stringify([queues ? [...queues].sort() : null, kinds ? [...kinds].sort() : null]);
  }

  /**
   * Waits until this claim is woken for a due job of its group (`hint` or `due`: the caller claims,
   * then answers the group, see {@link WaitEnd}), or until `untilMs` (epoch ms, server clock), the
   * poll interval, `signal`'s abort or the waiter's close (`timer`). `nextRunAtMs` is the next run
   * time read after the caller's empty claim (database clock, whose now was `dbNowMs` at
   * `dbNowReadAtMs` on the server's clock; null when nothing is waiting), sent at `claimSentAtMs`
   * (server clock): a later one sets the group's timer; one already due fell due after that claim
   * went out (claim again at once) or before it, when another claim holds it (look again after
   * RECHECK_DUE_MS, never a spin).
   */
  async wait(
    groupKey: string,
    times: {
      untilMs: number;
      nextRunAtMs: number | null;
      dbNowMs: number;
      dbNowReadAtMs: number;
      claimSentAtMs: number;
    },
    signal?: AbortSignal,
  ): Promise<WaitEnd> {
    if (this.isClosed || signal?.aborted) return 'timer';
    this.unsubscribe ??= this.store.subscribe((wakeUp) => this.onWakeUp(wakeUp));
    await this.unsubscribe;
    if (this.isClosed || signal?.aborted) return 'timer';
    const now = Date.now();
    this.dbOffsetMs = times.dbNowMs - times.dbNowReadAtMs;
    const group = this.group(groupKey);
    let delayMs = Math.max(0, Math.min(times.untilMs - now, this.pollIntervalMs));
    if (times.nextRunAtMs !== null) {
      const dueAtMs = times.nextRunAtMs - this.dbOffsetMs + 1;
      if (dueAtMs > now + DUE_MARGIN_MS) this.setDue(group, dueAtMs, now);
      else if (dueAtMs > times.claimSentAtMs) {
        this.dropIfIdle(group);
        return 'timer';
      } else delayMs = Math.min(delayMs, RECHECK_DUE_MS);
    }
    return new Promise<WaitEnd>((resolve) => {
      const wait: Wait = {
        group,
        timer: setTimeout(() => wait.end('timer'), delayMs),
        end: (how) => {
          clearTimeout(wait.timer);
          if (!group.waits.delete(wait)) return;
          signal?.removeEventListener('abort', onAbort);
          this.dropIfIdle(group);
          resolve(how);
        },
      };
      const onAbort = () => wait.end('timer');
      group.waits.add(wait);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Told by a claim woken as `how` (`hint` or `due`) whose claim came back full, or never ran (its
   * client left, the store failed): the next waiting claim of the group is woken in its place,
   * for the same reason.
   */
  passOn(groupKey: string, how: WaitEnd): void {
    const group = this.groups.get(groupKey);
    if (group && how !== 'timer') this.wakeOne(group, how);
  }

  /**
   * Told the next run time (database clock, whose now was `dbNowMs` at `dbNowReadAtMs` on the
   * server's clock) read after a `due` claim
   * (sent at `claimSentAtMs`, server clock) came back short: the group's timer had carried only
   * the earliest job, so the later ones' hints were dropped and nobody else knows when they fall
   * due. One already due fell due after that claim went out and wakes a claim now (a stream of
   * delayed jobs); one due before it is held by another claim and is looked at after
   * RECHECK_DUE_MS.
   */
  nextDue(
    groupKey: string,
    nextRunAtMs: number | null,
    dbNow: { dbNowMs: number; dbNowReadAtMs: number },
    claimSentAtMs: number,
  ): void {
    const group = this.groups.get(groupKey);
    if (!group || nextRunAtMs === null || this.isClosed) return;
    const now = Date.now();
    this.dbOffsetMs = dbNow.dbNowMs - dbNow.dbNowReadAtMs;
    const dueAtMs = nextRunAtMs - this.dbOffsetMs + 1;
    if (dueAtMs > now + DUE_MARGIN_MS) this.setDue(group, dueAtMs, now);
    else if (dueAtMs > claimSentAtMs) this.wakeOne(group, 'due');
    else this.setDue(group, now + RECHECK_DUE_MS, now);
  }

  /** How many claims are waiting right now. */
  get waiting(): number {
    let waiting = 0;
    for (const group of this.groups.values()) waiting += group.waits.size;
    return waiting;
  }

  /** True once {@link close} was called: claims must stop waiting and answer. */
  get closed(): boolean {
    return this.isClosed;
  }

  private group(key: string): WaitGroup {
    let group = this.groups.get(key);
    if (!group) {
      const [queues, kinds] = JSON.parse(key) as [string[] | null, string[] | null];
      group = { key, queues, kinds, waits: new Set(), dueAtMs: Number.POSITIVE_INFINITY, dueTimer: undefined };
      this.groups.set(key, group);
    }
    return group;
  }

  private onWakeUp(wakeUp: WakeUp): void {
    const now = Date.now();
    // The hint's run time on the server's clock; +1 ms as timers may fire a hair early.
    const dueAtMs = wakeUp.runAt === null ? now : wakeUp.runAt.getTime() - this.dbOffsetMs + 1;
    for (const group of [...this.groups.values()]) {
      if (!wakeUpConcerns(wakeUp, group.queues, group.kinds)) continue;
      if (dueAtMs <= now + DUE_MARGIN_MS) this.wakeOne(group, 'hint');
      else this.setDue(group, dueAtMs, now);
    }
  }

  /** Pulls the group's due timer to `dueAtMs` if that is earlier than the one set. */
  private setDue(group: WaitGroup, dueAtMs: number, now: number): void {
    if (group.dueAtMs <= dueAtMs) return;
    clearTimeout(group.dueTimer);
    group.dueAtMs = dueAtMs;
    group.dueTimer = setTimeout(() => {
      group.dueTimer = undefined;
      group.dueAtMs = Number.POSITIVE_INFINITY;
      this.wakeOne(group, 'due');
      this.dropIfIdle(group);
    }, dueAtMs - now);
  }

  /** Wakes the group's longest-waiting claim as the one to claim for a due job. */
  private wakeOne(group: WaitGroup, how: 'hint' | 'due'): void {
    const first = group.waits.values().next();
    if (!first.done) first.value.end(how);
  }

  /** Forgets a group with no waiting claim and no timer, so the map holds only live filters. */
  private dropIfIdle(group: WaitGroup): void {
    if (group.waits.size === 0 && group.dueTimer === undefined) this.groups.delete(group.key);
  }

  /** Releases every waiting request and the store subscription. */
  async close(): Promise<void> {
    this.isClosed = true;
    for (const group of [...this.groups.values()]) {
      clearTimeout(group.dueTimer);
      group.dueTimer = undefined;
      for (const wait of [...group.waits]) wait.end('timer');
    }
    this.groups.clear();
    const pending = this.unsubscribe;
    this.unsubscribe = null;
    if (pending) await (await pending)();
  }
}
