/**
 * Opening the PostgreSQL store while the server is not reachable yet (a restart, a worker started
 * before its database): it waits with backoff up to connectTimeoutMs, then fails clearly.
 */
import { createServer, type Server, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isTransientConnectionError, PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { assertPostgresReachable, POSTGRES_URL } from '../support/stores.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A free loopback port, found by binding to port 0 and closing again. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A TCP relay on `port` to the real PostgreSQL server. */
async function relayToPostgres(port: number): Promise<void> {
  const target = new URL(POSTGRES_URL);
  const server = createServer((client) => {
    const upstream = new Socket();
    upstream.connect(Number(target.port || 5432), target.hostname);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
}

/**
 * Listens on `port` and resets every connection at once; `seen` resolves after `count` of them.
 * `close` stops listening, so the port is free for the relay.
 */
async function resetConnections(port: number, count: number): Promise<{ seen: Promise<void>; close(): Promise<void> }> {
  let resolveSeen!: () => void;
  const seen = new Promise<void>((resolve) => {
    resolveSeen = resolve;
  });
  let connections = 0;
  const server = createServer((socket) => {
    connections += 1;
    socket.on('error', () => {});
    socket.resetAndDestroy();
    if (connections >= count) resolveSeen();
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function urlOnPort(port: number): string {
  const url = new URL(POSTGRES_URL);
  url.port = String(port);
  return url.toString();
}

describe('PostgresStore.open on an unreachable server', () => {
  it('waits for a server that starts listening later, then opens and works', async () => {
    await assertPostgresReachable();
    const port = await freePort();
    const schema = `t_connect_${process.pid}`;
    // Until the relay appears, something on the port resets every connection (ECONNRESET, a
    // transient error like the refusals of a server still starting): the open must retry.
    const attempts = await resetConnections(port, 2);
    const opening = PostgresStore.open(urlOnPort(port), { schema, connectTimeoutMs: 20_000 });
    // Waits for the open to have been turned away twice, so it is retrying, not on its first try.
    await attempts.seen;
    await attempts.close();
    await relayToPostgres(port);
    const store = await opening;
    try {
      expect(await store.now()).toBeInstanceOf(Date);
      await store.db.query(`DROP SCHEMA ${schema} CASCADE`);
    } finally {
      await store.close();
    }
  });

  it('gives up after connectTimeoutMs with the connection error', async () => {
    const port = await freePort();
    const started = Date.now();
    await expect(PostgresStore.open(urlOnPort(port), { connectTimeoutMs: 500 })).rejects.toThrow(/ECONNREFUSED/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('does not retry an error that waiting cannot fix', async () => {
    const started = Date.now();
    const url = new URL(POSTGRES_URL);
    url.pathname = '/docket_no_such_database';
    await expect(PostgresStore.open(url.toString(), { connectTimeoutMs: 20_000 })).rejects.toThrow(/does not exist/);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(isTransientConnectionError(Object.assign(new Error('x'), { code: '57P03' }))).toBe(true);
    expect(isTransientConnectionError(Object.assign(new Error('x'), { code: '3D000' }))).toBe(false);
  });
});
