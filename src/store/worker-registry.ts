/**
 * The worker registry's input checks, shared by both stores (pure TypeScript, no SQL).
 *
 * A registration is checked before any SQL, so a bad one is refused with a ValidationError
 * naming the field (`worker.kinds[2]`, `ttlMs`) and nothing is written. Times are never taken
 * from the caller: started/last-seen/expiry come from the database clock (or a pinned `now`).
 */
import { ValidationError } from '../job/errors.js';
import { describe, validateKind, validateQueue } from '../job/job-spec.js';
import type { WorkerRegisterParams, WorkerRegistration } from './store.js';

/** Longest worker id, host or version string accepted, in characters. */
export const MAX_WORKER_TEXT_LENGTH = 200;

/** Longest registry ttl accepted (one day): a record must expire in a time an operator notices. */
export const MAX_WORKER_TTL_MS = 24 * 60 * 60 * 1000;

function text(field: string, value: unknown, allowEmpty: boolean): string {
  if (typeof value !== 'string' || (!allowEmpty && value === '')) {
    throw new ValidationError(field, `must be a${allowEmpty ? '' : ' non-empty'} string, got ${describe(value)}`);
  }
  if (value.length > MAX_WORKER_TEXT_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_WORKER_TEXT_LENGTH} characters`);
  }
  return value;
}

function names(field: string, value: unknown, check: (item: unknown, field: string) => string): string[] {
  if (!Array.isArray(value)) throw new ValidationError(field, `must be an array, got ${describe(value)}`);
  return value.map((item, index) => check(item, `${field}[${index}]`));
}

/** Checks a registration and returns a normalised copy (arrays copied, so later edits do not leak in). */
export function validateWorkerRegistration(worker: unknown, field = 'worker'): WorkerRegistration {
  if (typeof worker !== 'object' || worker === null || Array.isArray(worker)) {
    throw new ValidationError(field, `must be an object, got ${describe(worker)}`);
  }
  const w = worker as Record<string, unknown>;
  const pid = w.pid;
  if (pid !== null && (typeof pid !== 'number' || !Number.isInteger(pid) || pid < 0 || pid > 2 ** 31 - 1)) {
    throw new ValidationError(`${field}.pid`, `must be a non-negative integer or null, got ${describe(pid)}`);
  }
  const concurrency = w.concurrency;
  if (typeof concurrency !== 'number' || !Number.isInteger(concurrency) || concurrency < 0 || concurrency > 100_000) {
    throw new ValidationError(
      `${field}.concurrency`,
      `must be an integer between 0 and 100000, got ${describe(concurrency)}`,
    );
  }
  if (w.origin !== 'local' && w.origin !== 'remote') {
    throw new ValidationError(`${field}.origin`, `must be 'local' or 'remote', got ${describe(w.origin)}`);
  }
  return {
    id: text(`${field}.id`, w.id, false),
    host: text(`${field}.host`, w.host, true),
    pid: pid as number | null,
    version: text(`${field}.version`, w.version, true),
    queues: w.queues === null ? null : names(`${field}.queues`, w.queues, validateQueue),
    kinds: w.kinds === null ? null : names(`${field}.kinds`, w.kinds, validateKind),
    excludeKinds: names(`${field}.excludeKinds`, w.excludeKinds, validateKind),
    concurrency,
    origin: w.origin,
  };
}

/** Checks {@link WorkerRegisterParams}: the registration and a ttl of 1 ms to one day. */
export function validateWorkerRegister(params: WorkerRegisterParams): { worker: WorkerRegistration; ttlMs: number } {
  const worker = validateWorkerRegistration(params.worker);
  const ttlMs = params.ttlMs;
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_WORKER_TTL_MS) {
    throw new ValidationError('ttlMs', `must be an integer between 1 and ${MAX_WORKER_TTL_MS}, got ${describe(ttlMs)}`);
  }
  return { worker, ttlMs };
}

/** Checks a worker id for deregistration. */
export function validateWorkerId(id: unknown): string {
  return text('id', id, false);
}
