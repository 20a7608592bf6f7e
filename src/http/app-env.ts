/**
 * The Hono environment shared by every Docket route: what middleware puts on the context.
 */
import type { AuthVariables } from './auth.js';

/** Context variables: the authenticated principal and the request id used in logs. */
export interface AppEnv {
  Variables: AuthVariables & { requestId: string };
}
