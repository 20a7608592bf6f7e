/**
 * Long polling for remote claims. A claim that finds nothing waits until a wake-up hint arrives
 * (a submit, a retry, a release), the earliest live job becomes due, or the poll interval passes,
 * then tries again, until its wait runs out. One store subscription serves every waiting request,
 * so a thousand idle workers cost one listener, not a thousand. Hints can be lost, which is why
 * the poll interval still bounds every wait.
 */
import type { Store } from '../store/store.js';

/** Shares one store subscription among all waiting claims. */
export class ClaimWaiter {
  private readonly waiters = new Set<() => void>();
  private unsubscribe: Promise<() => Promise<void>> | null = null;
  private isClosed = false;

  constructor(
    private readonly store: Store,
    private readonly pollIntervalMs: number,
  ) {}

  /**
   * Resolves at the next hint, at `untilMs` (epoch ms, server clock), after the poll interval, or
   * when `signal` aborts or the waiter closes, whichever comes first.
   */
  async wait(untilMs: number, signal: AbortSignal | undefined, dueInMs: number | null): Promise<void> {
    if (this.isClosed || signal?.aborted) return;
    this.unsubscribe ??= this.store.subscribe(() => this.wakeAll());
    await this.unsubscribe;
    const delayMs = Math.max(0, Math.min(untilMs - Date.now(), this.pollIntervalMs, dueInMs ?? Infinity));
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, delayMs);
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** How many claims are waiting right now. */
  get waiting(): number {
    return this.waiters.size;
  }

  /** True once {@link close} was called: claims must stop waiting and answer. */
  get closed(): boolean {
    return this.isClosed;
  }

  private wakeAll(): void {
    for (const wake of [...this.waiters]) wake();
  }

  /** Releases every waiting request and the store subscription. */
  async close(): Promise<void> {
    this.isClosed = true;
    this.wakeAll();
    const pending = this.unsubscribe;
    this.unsubscribe = null;
    if (pending) await (await pending)();
  }
}
