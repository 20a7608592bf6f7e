/**
 * Kinds Docket itself can execute, and the reserved queue they run on. Built-in jobs live on a
 * queue of their own so `docket serve` can run local workers for them without ever claiming a
 * user's job, and so remote (HTTP) workers, which never get built-in kinds, cannot see them.
 */

/** The built-in webhook kind: POST `payload.body` to `payload.url` at run time (src/http/webhook-handler.ts). */
export const WEBHOOK_KIND = 'docket.webhook';

/** Every kind Docket executes itself. */
export const BUILTIN_KINDS: readonly string[] = Object.freeze([WEBHOOK_KIND]);

/**
 * The reserved queue of built-in kinds. A built-in job submitted without a queue goes here; a
 * built-in job on another queue, or a user kind on this queue, is refused (field `queue`).
 */
export const BUILTIN_QUEUE = 'docket.builtin';

/** True for a kind Docket executes itself. */
export function isBuiltinKind(kind: string): boolean {
  return BUILTIN_KINDS.includes(kind);
}
