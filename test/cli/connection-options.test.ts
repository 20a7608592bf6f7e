/**
 * The PostgreSQL connection options on the command line: every database command and `docket serve`
 * take them as flags and environment variables, and a bad value is refused (exit 2) by the
 * library's own rule, naming where it came from, before any store is opened or created.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveStoreTarget } from '../../src/cli/open-cli-docket.js';
import { loadServerConfig } from '../../src/http/server-config.js';
import { runDocketInProcess } from './run-docket.js';

const dir = mkdtempSync(join(tmpdir(), 'docket-cli-connopt-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function withEnv<T>(env: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
  Object.assign(process.env, env);
  try {
    return await fn();
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
}

describe('connection options on the command line', () => {
  it.each([
    [
      ['--statement-timeout-ms', 'abc'],
      /statementTimeoutMs must be an integer of ms .*got "abc" \(from --statement-timeout-ms\)/,
    ],
    [
      ['--idle-in-transaction-timeout-ms', '-1'],
      /idleInTransactionTimeoutMs must be .*got -1 \(from --idle-in-transaction-timeout-ms\)/,
    ],
    [
      ['--keep-alive-delay-ms', '0'],
      /keepAliveDelayMs must be an integer of ms from 1 .*\(from --keep-alive-delay-ms\)/,
    ],
    [
      ['--connect-attempt-timeout-ms', '1.5'],
      /connectAttemptTimeoutMs must be .*\(from --connect-attempt-timeout-ms\)/,
    ],
    [
      ['--listen-url', 'mysql://db/x'],
      /listenUrl must be a postgres:\/\/ URL .*got "mysql:\/\/db\/x" \(from --listen-url\)/,
    ],
  ])('submit refuses %j with exit 2 and writes nothing', async (flags, message) => {
    const db = join(dir, `refused-${flags[0]}.db`);
    const result = await runDocketInProcess(['submit', '--db', `sqlite:${db}`, '--kind', 'a', ...flags]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(existsSync(db)).toBe(false);
  });

  it('reads a value from the environment and names the variable when it is refused', async () => {
    const db = join(dir, 'refused-env.db');
    const result = await withEnv({ DOCKET_STATEMENT_TIMEOUT_MS: '-5' }, () =>
      runDocketInProcess(['submit', '--db', `sqlite:${db}`, '--kind', 'a']),
    );
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/statementTimeoutMs must be .*got -5 \(from \$DOCKET_STATEMENT_TIMEOUT_MS\)/);
    expect(existsSync(db)).toBe(false);
  });

  it('docket serve refuses a bad value the same way', async () => {
    const result = await runDocketInProcess([
      'serve',
      '--db',
      `sqlite:${join(dir, 'serve.db')}`,
      '--port',
      '0',
      '--keep-alive-delay-ms',
      '0',
    ]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/keepAliveDelayMs .*must be an integer of ms from 1 to 2147483647, got 0/);
  });

  it('accepts good values, "off" for listenUrl included', async () => {
    const db = join(dir, 'accepted.db');
    const result = await runDocketInProcess([
      'submit',
      '--db',
      `sqlite:${db}`,
      '--kind',
      'a',
      '--statement-timeout-ms',
      '15000',
      '--keep-alive-delay-ms',
      '5000',
      '--listen-url',
      'off',
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim()).toMatch(/^\d+$/);
  });

  it('takes "listenUrl": false from a config file shared by work and serve', () => {
    const file = join(dir, 'shared.json');
    writeFileSync(file, JSON.stringify({ listenUrl: false, statementTimeoutMs: 20_000 }));
    expect(resolveStoreTarget({ config: file }, { env: {} }).options).toMatchObject({
      listenUrl: false,
      statementTimeoutMs: 20_000,
    });
    expect(loadServerConfig({ file, env: {} }).docketOptions).toMatchObject({
      listenUrl: false,
      statementTimeoutMs: 20_000,
    });
    writeFileSync(file, JSON.stringify({ listenUrl: 5 }));
    expect(() => loadServerConfig({ file, env: {} })).toThrow(/listenUrl .*must be a postgres:\/\/ URL, or false/);
  });
});
