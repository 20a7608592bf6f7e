/**
 * Test helpers for the HTTP API: a real server on loopback over a fresh database, and a small
 * client that sends JSON with a bearer token.
 */
import type { ApiToken, Scope } from '../../src/http/auth.js';
import { loadServerConfig, type RunningServer, type ServerConfig, startServer } from '../../src/http/server.js';
import { createServerLogger, type ServerLogger } from '../../src/http/server-logger.js';
import { createTestDatabase, type StoreKind, type TestDatabase } from '../support/stores.js';

/** One token per scope, plus one holding every scope. */
export const TOKENS: Record<Scope | 'all', ApiToken> = {
  submit: { name: 'submitter', token: 'submit-secret-0123456789', scopes: ['submit'] },
  read: { name: 'reader', token: 'read-secret-0123456789ab', scopes: ['read'] },
  admin: { name: 'operator', token: 'admin-secret-0123456789a', scopes: ['admin'] },
  worker: { name: 'remote', token: 'worker-secret-0123456789', scopes: ['worker'] },
  all: { name: 'root', token: 'all-scopes-secret-012345', scopes: ['submit', 'read', 'admin', 'worker'] },
};

/** A running test server and its database. */
export interface TestServer {
  server: RunningServer;
  url: string;
  db: TestDatabase;
  config: ServerConfig;
  /** Sends a request; `body` is JSON-encoded unless it is a string. */
  call(
    method: string,
    path: string,
    options?: { token?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: unknown; headers: Headers }>;
  stop(): Promise<void>;
}

/** Starts a server on 127.0.0.1 with a free port over a fresh `kind` database. */
export async function startTestServer(
  options: {
    kind?: StoreKind;
    flags?: Record<string, unknown>;
    env?: Record<string, string>;
    tokens?: ApiToken[];
    random?: () => number;
    logger?: ServerLogger;
    /** Long-poll re-check interval (see AppConfig.longPollRecheckMs); default 1000 ms. */
    longPollRecheckMs?: number;
  } = {},
): Promise<TestServer> {
  const db = await createTestDatabase(options.kind ?? 'sqlite');
  const config = loadServerConfig({
    flags: {
      // A sharded store is named by its shard list (each URL with its ?schema=), never by db.
      ...(db.shards ? { shards: db.shards.join(',') } : { db: db.kind === 'postgres' ? db.url.split('?')[0] : db.url }),
      port: '0',
      concurrency: '0',
      ...options.flags,
    },
    env: { ...(db.schema && !db.shards ? { DOCKET_SCHEMA: db.schema } : {}), ...options.env },
  });
  config.tokens = options.tokens ?? Object.values(TOKENS);
  const server = await startServer({
    config,
    logger: options.logger ?? createServerLogger('silent'),
    random: options.random,
    longPollRecheckMs: options.longPollRecheckMs,
  });
  const defaultToken = TOKENS.all.token;
  return {
    server,
    url: server.url,
    db,
    config,
    async call(method, path, { token = defaultToken, body, headers = {} } = {}) {
      const init: RequestInit = { method, headers: { ...headers } };
      if (token !== null) (init.headers as Record<string, string>).authorization = `Bearer ${token}`;
      if (body !== undefined) {
        init.body = typeof body === 'string' ? body : JSON.stringify(body);
        (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
      }
      const response = await fetch(`${server.url}${path}`, init);
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Non-JSON bodies (metrics) are returned as text.
      }
      return { status: response.status, body: parsed, headers: response.headers };
    },
    async stop() {
      await server.close();
      await db.drop();
    },
  };
}
