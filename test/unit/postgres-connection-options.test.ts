/**
 * The PostgreSQL connection options: one parser (connection-options.ts) with stated defaults and
 * clear refusals, the per-purpose `pg` settings built from it, and the LISTEN reconnect delay.
 */
import { describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { seededRandom } from '../../src/retry/random.js';
import { STORE_SETTINGS } from '../../src/settings.js';
import {
  postgresClientConfig,
  QUERY_TIMEOUT_MARGIN_MS,
  resolvePostgresConnectionOptions,
} from '../../src/store/postgres/connection-options.js';
import { reconnectDelayMs } from '../../src/store/postgres/wake-up-listener.js';

describe('resolvePostgresConnectionOptions', () => {
  it('applies the documented defaults', () => {
    expect(resolvePostgresConnectionOptions()).toEqual({
      statementTimeoutMs: 30_000,
      idleInTransactionTimeoutMs: 60_000,
      keepAliveDelayMs: 10_000,
      connectAttemptTimeoutMs: 10_000,
      connectTimeoutMs: 30_000,
      listenUrl: undefined,
    });
  });

  it('states the same defaults in the CLI and serve help as the parser applies', () => {
    const defaults = resolvePostgresConnectionOptions();
    for (const key of [
      'statementTimeoutMs',
      'idleInTransactionTimeoutMs',
      'keepAliveDelayMs',
      'connectAttemptTimeoutMs',
    ] as const) {
      expect(STORE_SETTINGS.find((s) => s.key === key)?.defaultText, key).toBe(String(defaults[key]));
    }
  });

  it.each([
    ['statementTimeoutMs', -1, /statementTimeoutMs must be an integer of ms from 0 to 2147483647 \(0 sends none/],
    ['statementTimeoutMs', 'abc', /statementTimeoutMs must be .*, got "abc"/],
    ['idleInTransactionTimeoutMs', 1.5, /idleInTransactionTimeoutMs must be an integer of ms from 0/],
    ['keepAliveDelayMs', 0, /keepAliveDelayMs must be an integer of ms from 1 to/],
    [
      'connectAttemptTimeoutMs',
      2 ** 31,
      /connectAttemptTimeoutMs must be an integer of ms from 1 to 2147483647, got 2147483648/,
    ],
    ['connectTimeoutMs', Number.NaN, /connectTimeoutMs must be an integer of ms from 0 .*got NaN/],
    ['listenUrl', 'mysql://x', /listenUrl must be a postgres:\/\/ URL for the LISTEN connection, or false \("off"\)/],
    ['listenUrl', true, /listenUrl must be .*, got true/],
  ])('refuses %s = %s with an error naming it', (key, value, message) => {
    expect(() => resolvePostgresConnectionOptions({ [key]: value } as never)).toThrow(message);
  });

  it('masks a password in a refused listen URL', () => {
    expect(() => resolvePostgresConnectionOptions({ listenUrl: 'postgres://u:secret@' as never })).toThrow(
      /postgres:\/\/u:\*\*\*@/,
    );
  });

  it('reads listenUrl false, "off" and "false" as no LISTEN, and keeps a URL', () => {
    expect(resolvePostgresConnectionOptions({ listenUrl: false }).listenUrl).toBe(false);
    expect(resolvePostgresConnectionOptions({ listenUrl: 'off' }).listenUrl).toBe(false);
    expect(resolvePostgresConnectionOptions({ listenUrl: ' FALSE ' }).listenUrl).toBe(false);
    expect(resolvePostgresConnectionOptions({ listenUrl: 'postgresql://db:5432/x' }).listenUrl).toBe(
      'postgresql://db:5432/x',
    );
  });

  it('is applied by Docket.open on every store, before anything is opened', async () => {
    await expect(Docket.open({ url: 'sqlite::memory:', statementTimeoutMs: -5 })).rejects.toThrow(
      /statementTimeoutMs must be/,
    );
    await expect(Docket.open({ url: 'postgres://127.0.0.1:1/x', listenUrl: 'nope' })).rejects.toThrow(
      /listenUrl must be/,
    );
  });
});

describe('postgresClientConfig', () => {
  const settings = resolvePostgresConnectionOptions({
    statementTimeoutMs: 4000,
    idleInTransactionTimeoutMs: 7000,
    keepAliveDelayMs: 3000,
    connectAttemptTimeoutMs: 2000,
  });

  it('gives the pool the statement timeout and a read deadline just past it', () => {
    expect(postgresClientConfig('postgres://h/d', settings, 'pool')).toMatchObject({
      keepAlive: true,
      keepAliveInitialDelayMillis: 3000,
      connectionTimeoutMillis: 2000,
      idle_in_transaction_session_timeout: 7000,
      statement_timeout: 4000,
      query_timeout: 4000 + QUERY_TIMEOUT_MARGIN_MS,
    });
  });

  it('gives maintenance and LISTEN connections keepalives but no statement timeout or read deadline', () => {
    for (const purpose of ['maintenance', 'listen'] as const) {
      const config = postgresClientConfig('postgres://h/d', settings, purpose);
      expect(config, purpose).toMatchObject({ keepAlive: true, keepAliveInitialDelayMillis: 3000 });
      expect(config.statement_timeout, purpose).toBeUndefined();
      expect(config.query_timeout, purpose).toBeUndefined();
    }
  });

  it('sends no statement timeout at all when it is 0 (the role or server setting applies)', () => {
    const off = resolvePostgresConnectionOptions({ statementTimeoutMs: 0 });
    const config = postgresClientConfig('postgres://h/d', off, 'pool');
    expect(config.statement_timeout).toBeUndefined();
    expect(config.query_timeout).toBeUndefined();
  });
});

describe('reconnectDelayMs', () => {
  it('doubles from the minimum to the cap, jittered within [step/2, step]', () => {
    const random = seededRandom(7);
    for (let failures = 0; failures < 40; failures += 1) {
      const step = Math.min(5000, 100 * 2 ** failures);
      const delay = reconnectDelayMs(failures, 100, 5000, random);
      expect(delay, `failures ${failures}`).toBeGreaterThanOrEqual(step / 2);
      expect(delay, `failures ${failures}`).toBeLessThanOrEqual(step);
    }
  });

  it('spreads a fleet: the same step gives different delays for different draws', () => {
    const random = seededRandom(11);
    const delays = new Set(Array.from({ length: 20 }, () => reconnectDelayMs(10, 100, 5000, random)));
    expect(delays.size).toBeGreaterThan(10);
  });
});
