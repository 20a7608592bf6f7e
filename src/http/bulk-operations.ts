/**
 * Bulk operations of one server process: a bulk action applied to every job a filter matches,
 * walked by id in batches of {@link BULK_BATCH_SIZE}, each batch one short store transaction, so
 * no lock is held for the whole walk and the API stays responsive.
 *
 * Safe to repeat: every action is idempotent per job (a retried, purged or cancelled job no longer
 * matches; a reschedule sets the same time again), so a second run after a reload changes
 * nothing more. While an operation runs, starting the same one (same action, filter and runAt)
 * joins it instead of walking twice. Operations live in memory: a restart forgets them, never the
 * batches they already committed.
 */
import { randomUUID } from 'node:crypto';
import type { Docket } from '../docket.js';
import type { BulkAction, JobFilter, JobFilterText } from '../job/job-filter.js';

/** Jobs one batch acts on: small enough that a batch commits in milliseconds. */
export const BULK_BATCH_SIZE = 1000;
/** Finished operations kept for GET /v1/bulk. */
const KEPT_OPERATIONS = 50;

/** A bulk operation as the API shows it. */
export interface BulkOperation {
  id: string;
  action: BulkAction;
  /** The filter as the caller wrote it (text fields). */
  filter: JobFilterText;
  runAt: Date | null;
  state: 'running' | 'done' | 'failed';
  /** The matched count at start (the preview's). */
  total: number;
  totalEstimated: boolean;
  /** Matches processed so far. */
  done: number;
  /** Of those, how many the action changed. */
  affected: number;
  startedAt: Date;
  finishedAt: Date | null;
  error: string | null;
}

/** A request to start an operation: the parsed filter and its text (for display and joining). */
export interface BulkRequest {
  action: BulkAction;
  filter: JobFilter;
  filterText: JobFilterText;
  runAt: Date | null;
}

/** Runs bulk operations and tells listeners of every change. */
export class BulkOperations {
  private readonly operations = new Map<string, BulkOperation>();
  private readonly running = new Map<string, Promise<void>>();
  /** The identity (see operationKey) of each running operation, for joining. */
  private readonly runningKeys = new Map<string, string>();
  private readonly starting = new Map<string, Promise<BulkOperation>>();
  private readonly listeners = new Set<(operation: BulkOperation) => void>();
  private closed = false;

  constructor(private readonly docket: Docket) {}

  /**
   * Starts `request`, or joins the running operation with the same action, filter and runAt.
   * Resolves once the total is counted (the walk goes on in the background).
   */
  async start(request: BulkRequest): Promise<{ operation: BulkOperation; joined: boolean }> {
    if (this.closed) throw new Error('the server is stopping');
    const key = operationKey(request);
    for (const [id, runningKey] of this.runningKeys) {
      const operation = this.operations.get(id);
      if (operation && runningKey === key) return { operation: { ...operation }, joined: true };
    }
    // A start of the same operation still counting its total (two clicks, two tabs) is joined too.
    const starting = this.starting.get(key);
    if (starting) return { operation: { ...(await starting) }, joined: true };
    const begun = this.begin(request, key);
    this.starting.set(key, begun);
    try {
      return { operation: { ...(await begun) }, joined: false };
    } finally {
      this.starting.delete(key);
    }
  }

  private async begin(request: BulkRequest, key: string): Promise<BulkOperation> {
    const total = await this.docket.countMatching({ action: request.action, filter: request.filter });
    const operation: BulkOperation = {
      id: `op-${randomUUID()}`,
      action: request.action,
      filter: request.filterText,
      runAt: request.runAt,
      state: 'running',
      total: total.count,
      totalEstimated: total.estimated,
      done: 0,
      affected: 0,
      startedAt: new Date(),
      finishedAt: null,
      error: null,
    };
    this.operations.set(operation.id, operation);
    this.runningKeys.set(operation.id, key);
    this.forget();
    this.emit(operation);
    const walk = this.walk(operation, request).finally(() => {
      this.running.delete(operation.id);
      this.runningKeys.delete(operation.id);
    });
    this.running.set(operation.id, walk);
    return operation;
  }

  /** One operation, or undefined. */
  get(id: string): BulkOperation | undefined {
    const operation = this.operations.get(id);
    return operation ? { ...operation } : undefined;
  }

  /** The kept operations, newest first. */
  list(): BulkOperation[] {
    return [...this.operations.values()].reverse().map((operation) => ({ ...operation }));
  }

  /** Calls `listener` on every start, batch and end; returns the unsubscribe function. */
  subscribe(listener: (operation: BulkOperation) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops walking after the batch in flight; resolves when every walk has stopped. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.running.values()]);
  }

  private async walk(operation: BulkOperation, request: BulkRequest): Promise<void> {
    let afterId: string | undefined;
    try {
      for (;;) {
        if (this.closed) throw new Error('stopped: the server was stopping; run the operation again to finish it');
        const batch = await this.docket.bulkApplyBatch({
          action: request.action,
          filter: request.filter,
          limit: BULK_BATCH_SIZE,
          ...(afterId === undefined ? {} : { afterId }),
          ...(request.runAt === null ? {} : { runAt: request.runAt }),
        });
        operation.done += batch.scanned;
        operation.affected += batch.affected;
        if (batch.lastId === null || batch.scanned < BULK_BATCH_SIZE) break;
        afterId = batch.lastId;
        this.emit(operation);
      }
      operation.state = 'done';
    } catch (error) {
      operation.state = 'failed';
      operation.error = (error as Error).message;
    }
    operation.finishedAt = new Date();
    this.emit(operation);
  }

  private emit(operation: BulkOperation): void {
    const snapshot = { ...operation };
    for (const listener of this.listeners) listener(snapshot);
  }

  /** Drops the oldest finished operations beyond the kept number. */
  private forget(): void {
    const finished = [...this.operations.values()].filter((operation) => operation.state !== 'running');
    for (const operation of finished.slice(0, Math.max(0, this.operations.size - KEPT_OPERATIONS))) {
      this.operations.delete(operation.id);
    }
  }
}

/** What makes two requests the same operation: action, parsed filter and runAt. */
function operationKey(request: BulkRequest): string {
  const filter = request.filter;
  return JSON.stringify([
    request.action,
    filter.states ? [...filter.states].sort() : null,
    filter.queue ?? null,
    filter.kind ?? null,
    filter.idFrom ?? null,
    filter.idTo ?? null,
    filter.runAtFrom?.getTime() ?? null,
    filter.runAtTo?.getTime() ?? null,
    filter.payload ?? null,
    request.runAt?.getTime() ?? null,
  ]);
}
