/**
 * The live worker registry's rules: how long a record lives, how often a worker refreshes it, and
 * what a remote (HTTP) worker's registration must look like before it is stored.
 */
import { BUILTIN_KINDS } from '../job/builtin-kinds.js';
import { ValidationError } from '../job/errors.js';
import { describe, validateKind, validateQueue } from '../job/job-spec.js';
import type { WorkerRegistration } from '../store/store.js';

/** Default life of a registry record without a refresh: 30 s. */
export const DEFAULT_REGISTRY_TTL_MS = 30_000;
/** Refreshes per ttl (every 5 s by default): five may fail in a row before a live worker drops out. */
export const REGISTRY_REFRESHES_PER_TTL = 6;
/** Shortest ttl accepted (tests use short ones; below this refreshes become a load of their own). */
export const MIN_REGISTRY_TTL_MS = 300;
/** Longest ttl accepted: a day. */
export const MAX_REGISTRY_TTL_MS = 24 * 3600_000;
/** Longest worker id, host or version string stored. */
export const MAX_REGISTRY_TEXT_LENGTH = 200;

/** What the HTTP face knows about a remote worker; everything but `id` is optional. */
export interface RemoteWorkerRegistration {
  /** The remote worker's `workerId`. */
  id: string;
  host?: string | undefined;
  pid?: number | null | undefined;
  /** The client's version string. */
  version?: string | undefined;
  /** Queues it claims from; null or omitted means every queue. */
  queues?: readonly string[] | null | undefined;
  /** Kinds it claims; null or omitted means every kind (built-in kinds are always excluded). */
  kinds?: readonly string[] | null | undefined;
  /** Kinds it never claims; the built-in kinds are added to these. */
  excludeKinds?: readonly string[] | undefined;
  /** How many jobs it runs at once; default 1. */
  concurrency?: number | undefined;
}

/**
 * Validates a remote worker's registration and fills the rest in: origin `remote`, the built-in
 * kinds excluded (remote workers never get them). Throws {@link ValidationError} naming the field.
 */
export function normalizeRemoteRegistration(input: RemoteWorkerRegistration): WorkerRegistration {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new ValidationError('worker', `must be an object, got ${describe(input)}`);
  }
  const id = text(input.id, 'id', false);
  const pid = input.pid ?? null;
  if (pid !== null && (!Number.isInteger(pid) || pid < 0)) {
    throw new ValidationError('pid', `must be a non-negative integer or null, got ${describe(pid)}`);
  }
  const concurrency = input.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 100_000) {
    throw new ValidationError('concurrency', `must be an integer from 1 to 100000, got ${describe(concurrency)}`);
  }
  const excluded = names(input.excludeKinds ?? [], 'excludeKinds', validateKind) ?? [];
  return {
    id,
    host: text(input.host ?? '', 'host', true),
    pid,
    version: text(input.version ?? '', 'version', true),
    queues: names(input.queues ?? null, 'queues', validateQueue),
    kinds: names(input.kinds ?? null, 'kinds', validateKind),
    excludeKinds: [...new Set([...excluded, ...BUILTIN_KINDS])].sort(),
    concurrency,
    origin: 'remote',
  };
}

/** Validates a registry ttl (ms), defaulting to {@link DEFAULT_REGISTRY_TTL_MS}. */
export function validateRegistryTtlMs(value: unknown, field = 'ttlMs'): number {
  if (value === undefined) return DEFAULT_REGISTRY_TTL_MS;
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < MIN_REGISTRY_TTL_MS ||
    value > MAX_REGISTRY_TTL_MS
  ) {
    throw new ValidationError(
      field,
      `must be an integer from ${MIN_REGISTRY_TTL_MS} to ${MAX_REGISTRY_TTL_MS} ms, got ${describe(value)}`,
    );
  }
  return value;
}

function text(value: unknown, field: string, emptyAllowed: boolean): string {
  if (typeof value !== 'string' || (!emptyAllowed && value.trim() === '')) {
    throw new ValidationError(field, `must be a${emptyAllowed ? '' : ' non-empty'} string, got ${describe(value)}`);
  }
  if (value.length > MAX_REGISTRY_TEXT_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_REGISTRY_TEXT_LENGTH} characters`);
  }
  return value;
}

function names(
  value: readonly string[] | null,
  field: string,
  validate: (name: unknown, field: string) => string,
): string[] | null {
  if (value === null) return null;
  if (!Array.isArray(value))
    throw new ValidationError(field, `must be an array of names or null, got ${describe(value)}`);
  return [...new Set(value.map((name, i) => validate(name, `${field}[${i}]`)))].sort();
}
