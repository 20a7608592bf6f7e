/**
 * The kinds a worker's claims name. Resolved at `start()` from its handlers (or its explicit
 * `kinds` subset; null for `catchAll`), and widened while it runs when handlers are registered
 * later: a worker without an explicit `kinds` picks them up at its next claim or poll.
 */
import { resolveClaimKinds } from '../routing/routing.js';
import type { JobHandler } from './job-handler.js';

/** What {@link ClaimKinds} reads. */
export interface ClaimKindsOptions {
  handlers: ReadonlyMap<string, JobHandler<never>>;
  /** The worker's explicit subset, if any. */
  kinds: readonly string[] | undefined;
  catchAll: boolean;
  workerId: string;
}

/** One worker's claim kinds. */
export class ClaimKinds {
  /** The kinds claims name; null for a catch-all worker (or before the first resolve). */
  private resolved: readonly string[] | null = null;

  constructor(private readonly options: ClaimKindsOptions) {}

  /** Resolves the kinds from the handlers now (throws ConfigurationError when nothing useful could be claimed). */
  resolve(): readonly string[] | null {
    this.resolved = resolveClaimKinds({
      handlerKinds: this.options.handlers.keys(),
      kinds: this.options.kinds,
      catchAll: this.options.catchAll,
      workerId: this.options.workerId,
    });
    return this.resolved;
  }

  /** The kinds as last resolved; null for a catch-all worker. */
  get current(): readonly string[] | null {
    return this.resolved;
  }

  /**
   * Re-resolves when handlers were added since (handlers are only ever added, so a changed count
   * means new kinds) and the worker has no explicit `kinds` or `catchAll`; returns whether they grew.
   */
  widen(): boolean {
    if (this.resolved === null || this.options.kinds !== undefined) return false;
    if (this.options.handlers.size === this.resolved.length) return false;
    this.resolve();
    return true;
  }
}
