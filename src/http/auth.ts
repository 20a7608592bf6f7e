/**
 * Bearer-token authentication with scopes. Each configured token carries a name (safe to log) and
 * a secret (never logged). Secrets are compared in constant time: both sides are hashed to 32
 * bytes first, so neither the content nor the length of a guess leaks through response timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { HttpError } from './http-error.js';

/** What a token may do: submit jobs, read state, administer, or act as a remote worker. */
export const SCOPES = ['submit', 'read', 'admin', 'worker'] as const;

/** One of {@link SCOPES}. */
export type Scope = (typeof SCOPES)[number];

/** A configured API token. */
export interface ApiToken {
  /** A label for logs and metrics; never the secret. */
  name: string;
  /** The bearer secret the client sends. */
  token: string;
  scopes: readonly Scope[];
}

/** The identity a request authenticated as; `anonymous` when auth is off (loopback only). */
export interface Principal {
  name: string;
  scopes: ReadonlySet<Scope>;
}

const ALL_SCOPES: ReadonlySet<Scope> = new Set(SCOPES);

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Resolves bearer secrets to principals in constant time. */
export class TokenAuthenticator {
  private readonly entries: { name: string; digest: Buffer; scopes: ReadonlySet<Scope> }[];

  constructor(tokens: readonly ApiToken[]) {
    this.entries = tokens.map((t) => ({ name: t.name, digest: digest(t.token), scopes: new Set(t.scopes) }));
  }

  /** True when at least one token is configured; otherwise every request is trusted. */
  get enabled(): boolean {
    return this.entries.length > 0;
  }

  /** The principal owning `secret`, or null. Checks every entry so timing does not reveal which one matched. */
  authenticate(secret: string): Principal | null {
    const candidate = digest(secret);
    let found: Principal | null = null;
    for (const entry of this.entries) {
      if (timingSafeEqual(candidate, entry.digest) && found === null) {
        found = { name: entry.name, scopes: entry.scopes };
      }
    }
    return found;
  }
}

/** Hono variables set by {@link authMiddleware}. */
export interface AuthVariables {
  principal: Principal;
}

/** Authenticates the request; 401 without a valid bearer token (when tokens are configured). */
export function authMiddleware(auth: TokenAuthenticator): MiddlewareHandler<{ Variables: AuthVariables }> {
  return async (c, next) => {
    if (!auth.enabled) {
      c.set('principal', { name: 'anonymous', scopes: ALL_SCOPES });
      return next();
    }
    const header = c.req.header('authorization');
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      c.header('WWW-Authenticate', 'Bearer realm="docket"');
      throw new HttpError(401, 'unauthenticated', 'a bearer token is required (Authorization: Bearer <token>)');
    }
    const principal = auth.authenticate(match[1]);
    if (!principal) {
      c.header('WWW-Authenticate', 'Bearer realm="docket", error="invalid_token"');
      throw new HttpError(401, 'unauthenticated', 'the bearer token is not valid');
    }
    c.set('principal', principal);
    return next();
  };
}

/** Requires `scope` of the authenticated principal; 403 otherwise. */
export function requireScope(scope: Scope): MiddlewareHandler<{ Variables: AuthVariables }> {
  return async (c, next) => {
    const principal = c.get('principal');
    if (!principal?.scopes.has(scope)) {
      throw new HttpError(403, 'forbidden', `this endpoint needs the "${scope}" scope`);
    }
    return next();
  };
}
