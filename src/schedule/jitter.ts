/**
 * Spike spreading for schedules. A schedule's run for a slot starts at slot + offset, with the
 * offset uniform in [0, jitterMs): never before the slot. The offset is a hash, not a draw, so
 * every process computes the same run time for the same slot without talking to the others, and
 * the job inserted for a slot is the same whichever scheduler inserts it (one run per slot).
 * One-off jobs are spread by `normalizeSubmit` in src/job/job-spec.ts with an injected random.
 */
import { createHash } from 'node:crypto';

/** How a schedule's jitter offset is chosen. */
export type JitterMode = 'stable' | 'per_occurrence';

/** Every jitter mode, for validation and docs. */
export const JITTER_MODES = ['stable', 'per_occurrence'] as const satisfies readonly JitterMode[];

/** A uniform [0, 1) value from the SHA-256 of `key`: 48 bits, the same on every platform. */
function hashUnit(key: string): number {
  return createHash('sha256').update(key).digest().readUIntBE(0, 6) / 2 ** 48;
}

/**
 * The offset, uniform in [0, jitterMs), of a schedule's run for `slot`. `stable`: a hash of the
 * schedule id alone, the same for every slot and after a restart, so many schedules on the same
 * cron spread out while each keeps a fixed cadence. `per_occurrence`: a hash of the id and the
 * slot, different each time yet identical in every process.
 */
export function jitterOffsetMs(scheduleId: string, slot: Date, jitterMs: number, mode: JitterMode): number {
  if (!(jitterMs > 0)) return 0;
  const key = mode === 'stable' ? `stable\u0000${scheduleId}` : `slot\u0000${scheduleId}\u0000${slot.getTime()}`;
  return Math.floor(hashUnit(key) * jitterMs);
}

/** The run time of a slot given its jitter offset. */
export function runAtForSlot(slot: Date, offsetMs: number): Date {
  return new Date(slot.getTime() + offsetMs);
}
