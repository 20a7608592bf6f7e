/**
 * Idempotency-key scope and conflicts, shared by both stores (pure TypeScript, no SQL).
 *
 * Scope: a key is unique per (queue, kind) among live (pending, running) jobs. A repeat in the
 * same scope with an equal payload is answered with the live job (`created: false`); with a
 * different payload it is refused with an {@link IdempotencyConflictError}, because answering
 * with the live job would silently drop the caller's new work. "Equal" is JSON equality: object
 * key order and number spelling (`1` vs `1.0`) do not matter, as with PostgreSQL's jsonb `=`.
 *
 * Field names: a submit of one job names `idempotencyKey`; a batch of more than one names
 * `jobs[i].idempotencyKey` (the input position, as submitMany's validation errors do). Either way
 * nothing of the submit is written.
 */
import { IdempotencyConflictError } from '../job/errors.js';
import type { JobSpec } from '../job/job-spec.js';

/** The field an idempotency conflict names for input `index` of a submit of `batchSize` jobs. */
export function idempotencyField(index: number, batchSize: number): string {
  return batchSize > 1 ? `jobs[${index}].idempotencyKey` : 'idempotencyKey';
}

/** The error for input `index` whose key a live job (`existingId`) of the same scope holds with another payload. */
export function liveKeyConflict(
  spec: JobSpec,
  index: number,
  batchSize: number,
  existingId: string,
): IdempotencyConflictError {
  return new IdempotencyConflictError(
    idempotencyField(index, batchSize),
    existingId,
    `live job ${existingId} (queue ${JSON.stringify(spec.queue)}, kind ${JSON.stringify(spec.kind)}) holds key ` +
      `${JSON.stringify(spec.idempotencyKey)} with a different payload; nothing was written`,
  );
}

/** The scope a key is unique in, as one string (JSON, so no separator can collide). */
export function idempotencyScope(spec: Pick<JobSpec, 'queue' | 'kind' | 'idempotencyKey'>): string {
  return JSON.stringify([spec.queue, spec.kind, spec.idempotencyKey]);
}

/**
 * Refuses a batch that repeats a key in one scope with different payloads, before any SQL (so
 * nothing is written). Repeats with equal payloads are fine: the store maps them to one job.
 * The error's `existingId` is '' because the key's other holder is the batch's own earlier input.
 */
export function assertBatchKeysAgree(jobs: readonly JobSpec[]): void {
  if (jobs.length < 2) return;
  const firstByScope = new Map<string, number>();
  for (const [index, spec] of jobs.entries()) {
    if (spec.idempotencyKey === null) continue;
    const scope = idempotencyScope(spec);
    const first = firstByScope.get(scope);
    if (first === undefined) {
      firstByScope.set(scope, index);
      continue;
    }
    if (!sameJsonText(jobs[first]!.payloadJson, spec.payloadJson)) {
      throw new IdempotencyConflictError(
        idempotencyField(index, jobs.length),
        '',
        `repeats the key ${JSON.stringify(spec.idempotencyKey)} of jobs[${first}] (same queue and kind) with a ` +
          'different payload; nothing was written',
      );
    }
  }
}

/** Whether two jobs of a batch share a key's scope (queue, kind and key): the later repeats the earlier. */
export function batchRepeatsKey(jobs: readonly JobSpec[]): boolean {
  if (jobs.length < 2) return false;
  const scopes = new Set<string>();
  for (const spec of jobs) {
    if (spec.idempotencyKey === null) continue;
    const scope = idempotencyScope(spec);
    if (scopes.has(scope)) return true;
    scopes.add(scope);
  }
  return false;
}

/** Whether any job of a batch of more than one carries a key (only then can a batch half-conflict). */
export function batchNeedsAtomicKeys(jobs: readonly JobSpec[]): boolean {
  return jobs.length > 1 && jobs.some((spec) => spec.idempotencyKey !== null);
}

/** JSON equality of two JSON texts: key order and number spelling ignored, array order kept. */
export function sameJsonText(a: string, b: string): boolean {
  return a === b || sameJsonValue(JSON.parse(a) as unknown, JSON.parse(b) as unknown);
}

/** Deep equality of parsed JSON values. */
export function sameJsonValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, index) => sameJsonValue(item, b[index]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) return false;
  return keys.every((key) => Object.hasOwn(right, key) && sameJsonValue(left[key], right[key]));
}
