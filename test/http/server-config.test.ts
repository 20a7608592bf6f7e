import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  DATABASE_SETTING,
  DOCKET_SETTINGS,
  SERVE_ONLY_SETTING_KEYS,
  STORE_SETTINGS,
  WORKER_SETTINGS,
} from '../../src/cli/cli-settings.js';
import { WORK_COMMAND_SETTINGS } from '../../src/cli/commands/work-command.js';
import { resolveStoreTarget } from '../../src/cli/open-cli-docket.js';
import { Docket } from '../../src/docket.js';
import { startServer } from '../../src/http/server.js';
import {
  isLoopbackHost,
  loadServerConfig,
  localWorkerOptions,
  SERVER_SETTINGS,
  WORK_ONLY_SETTINGS,
} from '../../src/http/server-config.js';
import { createServerLogger } from '../../src/http/server-logger.js';
import { BUILTIN_QUEUE, WEBHOOK_KIND } from '../../src/job/builtin-kinds.js';
import { DEFAULT_CONNECT_TIMEOUT_MS } from '../../src/store/postgres/postgres-store.js';
import type { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { resolveWorkerOptions } from '../../src/worker/worker-options.js';
import { commandAt, knownOptionNames } from '../support/cli-introspection.js';

const dir = mkdtempSync(join(tmpdir(), 'docket-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configFile(content: unknown): string {
  const path = join(dir, `config-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

describe('loadServerConfig', () => {
  it('applies defaults when nothing is given', () => {
    expect(loadServerConfig({})).toMatchObject({
      db: 'sqlite:docket.db',
      host: '127.0.0.1',
      port: 8080,
      tokens: [],
      concurrency: 10,
      leaseMs: 30_000,
      bodyLimitBytes: 1024 * 1024,
      logLevel: 'info',
      webhookSecret: undefined,
      webhookAllowHosts: [],
    });
  });

  it('takes flags over environment over file', () => {
    const file = configFile({ port: 7000, concurrency: 3, logLevel: 'debug', db: 'sqlite:from-file.db' });
    const config = loadServerConfig({
      flags: { port: '9000' },
      env: { DOCKET_PORT: '8000', DOCKET_CONCURRENCY: '4' },
      file,
    });
    expect(config).toMatchObject({ port: 9000, concurrency: 4, logLevel: 'debug', db: 'sqlite:from-file.db' });
  });

  it('finds the file through --config or $DOCKET_CONFIG', () => {
    const file = configFile({ port: 7001 });
    expect(loadServerConfig({ flags: { config: file } }).port).toBe(7001);
    expect(loadServerConfig({ env: { DOCKET_CONFIG: file } }).port).toBe(7001);
  });

  it('parses tokens from the compact environment form and from JSON', () => {
    const config = loadServerConfig({
      env: { DOCKET_TOKENS: 'ops:admin+read:s3cret-with:colons-123 ci:submit:ci-secret-0123456789' },
    });
    expect(config.tokens).toEqual([
      { name: 'ops', scopes: ['admin', 'read'], token: 's3cret-with:colons-123' },
      { name: 'ci', scopes: ['submit'], token: 'ci-secret-0123456789' },
    ]);
    const json = loadServerConfig({
      env: { DOCKET_TOKENS: JSON.stringify([{ name: 'w', token: 'worker-secret-0123456', scopes: ['worker'] }]) },
    });
    expect(json.tokens[0]?.scopes).toEqual(['worker']);
  });

  it.each([
    [{ flags: { port: '80a' } }, /^port \(from --port\): must be an integer from 0 to 65535, got "80a"/],
    [{ flags: { port: '70000' } }, /^port \(from --port\): must be an integer from 0 to 65535/],
    [{ env: { DOCKET_PORT: '-1' } }, /^port \(from \$DOCKET_PORT\)/],
    [{ flags: { db: 'mysql://x' } }, /^db \(from --db\): must be a store URL/],
    [{ flags: { logLevel: 'loud' } }, /^logLevel \(from --log-level\): must be one of fatal, error/],
    [{ flags: { leaseMs: '10' } }, /^leaseMs \(from --lease-ms\): must be between 100 and 86400000, got 10$/],
    [{ flags: { queues: 'ok,bad queue' } }, /^queues\[1\] \(from --queues\): must match .*got "bad queue"$/],
    [
      { flags: { webhookAllowAddresses: '10.0.0.0/33' } },
      /^webhookAllowAddresses\[0\] \(from --webhook-allow-addresses\): .*prefix/,
    ],
    [
      { env: { DOCKET_TOKENS: 'ops:root:secret-secret-secret' } },
      /^tokens\[0\]\.scopes\[0\] \(from \$DOCKET_TOKENS\): must be one of submit, read, admin, worker/,
    ],
    [
      { env: { DOCKET_TOKENS: 'ops:admin:short' } },
      /^tokens\[0\]\.token \(from \$DOCKET_TOKENS\): must be at least 16 characters/,
    ],
    [
      { env: { DOCKET_WEBHOOK_SECRET: 'short' } },
      /^webhookSecret \(from \$DOCKET_WEBHOOK_SECRET\): must be at least 16/,
    ],
    [
      { flags: { host: '0.0.0.0' } },
      /^host \(from --host\): refusing to listen on non-loopback address 0\.0\.0\.0 without authentication/,
    ],
  ])('refuses %j with a message naming the setting', (input, message) => {
    expect(() => loadServerConfig(input)).toThrow(message);
  });

  it('never echoes a token secret in an error', () => {
    const secret = 'sup3r-s3cret-value-that-must-not-leak';
    let message = '';
    try {
      loadServerConfig({ env: { DOCKET_TOKENS: `ops:nope:${secret}` } });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/tokens/);
    expect(message).not.toContain(secret);
  });

  it('names the file for unreadable, malformed or unknown settings', () => {
    expect(() => loadServerConfig({ file: join(dir, 'missing.json') })).toThrow(
      /config file .*missing\.json: cannot be read \(ENOENT\)/,
    );
    expect(() => loadServerConfig({ file: configFile('{port: 1') })).toThrow(/is not valid JSON/);
    expect(() => loadServerConfig({ file: configFile({ prot: 1 }) })).toThrow(/unknown setting "prot"/);
    expect(() => loadServerConfig({ file: configFile({ port: 'x' }) })).toThrow(
      /^port \(from "port" in the config file\)/,
    );
  });

  it('allows a non-loopback host once tokens are configured, and refuses duplicate token names', () => {
    const tokens = [
      { name: 'a', token: 'aaaaaaaaaaaaaaaaaaaa', scopes: ['read'] },
      { name: 'b', token: 'bbbbbbbbbbbbbbbbbbbb', scopes: ['admin'] },
    ];
    expect(loadServerConfig({ flags: { host: '0.0.0.0' }, file: configFile({ tokens }) }).host).toBe('0.0.0.0');
    expect(() => loadServerConfig({ file: configFile({ tokens: [tokens[0], tokens[0]] }) })).toThrow(/used twice/);
  });

  it('recognises loopback hosts', () => {
    for (const host of ['127.0.0.1', '127.8.9.10', '::1', '[::1]', 'localhost'])
      expect(isLoopbackHost(host)).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '128.0.0.1'])
      expect(isLoopbackHost(host)).toBe(false);
  });
});

/** `--flag <x> … (default: D;` → D, from a command's help. */
function helpDefault(help: string, flag: string): string | undefined {
  const flat = help.replace(/\s+/g, ' ');
  const escaped = flag.replace(/[-[\]]/g, '\\$&');
  return new RegExp(`${escaped} (?:<[a-z]+>|\\[bool\\]) .*?\\(default: (.*?); env `).exec(flat)?.[1];
}

/** A valid value for every key a config file of serve or work may hold. */
const SAMPLE_FILE: Record<string, unknown> = {
  db: 'sqlite:shared.db',
  shards: ['postgres://a@127.0.0.1:5471/d?schema=s', 'postgres://a@127.0.0.1:5472/d?schema=s'],
  schema: 'shared_schema',
  poolSize: 7,
  connectTimeoutMs: 1500,
  connectAttemptTimeoutMs: 2500,
  statementTimeoutMs: 20_000,
  idleInTransactionTimeoutMs: 45_000,
  keepAliveDelayMs: 5000,
  listenUrl: 'postgres://listener@127.0.0.1:5432/direct',
  wakeHorizonMs: 2500,
  busyTimeoutMs: 1234,
  synchronous: 'full',
  retentionMs: 3_600_000,
  pruneIntervalMs: 60_000,
  unhandledAfterMs: 90_000,
  id: 'shared-worker',
  concurrency: 3,
  queues: ['emails', 'reports'],
  kinds: ['email.send'],
  catchAll: false,
  registryTtlMs: 45_000,
  leaseMs: 60_000,
  heartbeatIntervalMs: 15_000,
  pollIntervalMs: 250,
  shutdownGraceMs: 5000,
  prefetch: 4,
  claimBatchSize: 6,
  maxConcurrentClaims: 3,
  completionBatchSize: 100,
  completionFlushMs: 2,
  handlers: './handlers.mjs',
  logLevel: 'warn',
  metricsPort: 9464,
  metricsHost: '127.0.0.1',
  host: '127.0.0.1',
  port: 0,
  tokens: [{ name: 'ops', token: 'ops-secret-0123456789', scopes: ['admin'] }],
  bodyLimitBytes: 4096,
  maxLongPollMs: 1000,
  webhookSecret: 'webhook-secret-0123456789',
  webhookAllowHosts: ['hooks.example.com'],
  webhookAllowAddresses: ['10.0.0.0/8'],
  webhookTimeoutMs: 2000,
  webhookRetryAfterCapMs: 60_000,
  receiptSecret: 'receipt-secret-0123456789',
  dashboardPath: '/ops',
};

/** Text of a sample value, as a flag or variable carries it. */
const asText = (value: unknown) => (Array.isArray(value) ? value.join(',') : String(value));

/** Where a shared setting lands in the server configuration. */
function landed(config: ReturnType<typeof loadServerConfig>, key: string): unknown {
  if (key in config.docketOptions) return (config.docketOptions as Record<string, unknown>)[key];
  if (key in config.workerOptions) return (config.workerOptions as Record<string, unknown>)[key];
  return (config as unknown as Record<string, unknown>)[key];
}

describe('docket serve takes every store, Docket and worker option, named as for docket work', () => {
  const serveKeys = new Set(SERVER_SETTINGS.map((s) => s.key));

  it('has a setting for every option the worker and Docket.open accept (read from the library)', async () => {
    const workerKnown = await knownOptionNames(() => resolveWorkerOptions({ notAnOption: 1 } as never));
    const docketKnown = await knownOptionNames(() => Docket.open({ notAnOption: 1 } as never));
    // url is --db; store, random and logger are objects only code can pass.
    const settable = docketKnown.filter((name) => !['url', 'store', 'random', 'logger'].includes(name));
    for (const key of [...workerKnown, ...settable, 'db']) expect(serveKeys.has(key), key).toBe(true);
    expect(workerKnown.length).toBeGreaterThanOrEqual(15);
    expect(settable.length).toBeGreaterThanOrEqual(9);
  });

  it('uses the same flag, aliases, variable and file key as docket work for each shared option', () => {
    for (const shared of [DATABASE_SETTING, ...STORE_SETTINGS, ...DOCKET_SETTINGS, ...WORKER_SETTINGS]) {
      const mine = SERVER_SETTINGS.find((s) => s.key === shared.key);
      expect(mine, shared.key).toBeDefined();
      expect(mine?.flag, shared.key).toBe(shared.flag);
      expect(mine?.env, shared.key).toBe(shared.env);
      expect(mine?.aliases ?? [], shared.key).toEqual(shared.aliases ?? []);
    }
    for (const own of WORK_COMMAND_SETTINGS) {
      const mine = SERVER_SETTINGS.find((s) => s.key === own.key);
      // Each of work's own keys is honoured by serve under the same names, or documented as work-only.
      if (mine) expect([mine.flag, mine.env], own.key).toEqual([own.flag, own.env]);
      else
        expect(
          WORK_ONLY_SETTINGS[own.key],
          `${own.key} is neither a serve setting nor documented work-only`,
        ).toBeTruthy();
    }
    for (const key of SERVE_ONLY_SETTING_KEYS) expect(serveKeys.has(key), key).toBe(true);
  });

  it('offers each as a serve flag with the true default and its variable in --help, as work states them', () => {
    const serve = commandAt(['serve']);
    const serveHelp = serve.helpInformation();
    const workHelp = commandAt(['work']).helpInformation();
    for (const setting of SERVER_SETTINGS) {
      if (setting.flag === undefined) {
        // Secrets: no flag, so they never show in `ps` or shell history.
        expect(['tokens', 'webhookSecret', 'receiptSecret']).toContain(setting.key);
        continue;
      }
      expect(
        serve.options.some((option) => option.long === setting.flag),
        setting.flag,
      ).toBe(true);
      expect(serveHelp, setting.flag).toContain(`$${setting.env}`);
      expect(helpDefault(serveHelp, setting.flag), setting.flag).toBe(setting.defaultText);
    }
    for (const shared of [DATABASE_SETTING, ...STORE_SETTINGS, ...DOCKET_SETTINGS, ...WORKER_SETTINGS]) {
      expect(helpDefault(serveHelp, shared.flag), shared.flag).toBe(helpDefault(workHelp, shared.flag));
    }
    expect(helpDefault(serveHelp, '--connect-timeout-ms')).toBe(String(DEFAULT_CONNECT_TIMEOUT_MS));
  });

  it('applies the defaults the worker really applies when nothing is set', () => {
    const defaults = resolveWorkerOptions({});
    const config = loadServerConfig({});
    expect(config).toMatchObject({
      concurrency: defaults.concurrency,
      leaseMs: defaults.leaseMs,
      shutdownGraceMs: defaults.shutdownGraceMs,
    });
    expect(config.docketOptions).toEqual({});
    expect(config.workerOptions).toEqual({});
    expect(config.ignoredSettings).toEqual([]);
  });

  it('reaches every shared setting from a flag, the environment and the config file', () => {
    for (const setting of [...STORE_SETTINGS, ...DOCKET_SETTINGS, ...WORKER_SETTINGS]) {
      const value = setting.key === 'schema' ? 'from_sources' : SAMPLE_FILE[setting.key];
      expect(value, `no sample for ${setting.key}`).toBeDefined();
      const flag = setting.flag.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      const fromFlag = loadServerConfig({ flags: { [flag]: asText(value) } });
      const fromEnv = loadServerConfig({ env: { [setting.env]: asText(value) } });
      const fromFile = loadServerConfig({ file: configFile({ [setting.key]: value }) });
      expect(landed(fromFlag, setting.key), `${setting.key} from ${setting.flag}`).toEqual(value);
      expect(landed(fromEnv, setting.key), `${setting.key} from $${setting.env}`).toEqual(value);
      expect(landed(fromFile, setting.key), `${setting.key} from the file`).toEqual(value);
      expect(fromFlag.sources.get(setting.key)).toBe(`from ${setting.flag}`);
      expect(fromEnv.sources.get(setting.key)).toBe(`from $${setting.env}`);
      expect(fromFile.sources.get(setting.key)).toBe(`from "${setting.key}" in the config file`);
    }
    // The old flag names work stays compatible with are accepted here too.
    expect(loadServerConfig({ flags: { heartbeatMs: '4000' } }).workerOptions.heartbeatIntervalMs).toBe(4000);
    expect(loadServerConfig({ flags: { connectTimeout: '0' } }).docketOptions.connectTimeoutMs).toBe(0);
    expect(loadServerConfig({ flags: { catchAll: true } }).workerOptions.catchAll).toBe(true);
  });

  it('accepts one config file for serve and work alike, and reports the keys only work honours', () => {
    const union = new Set([...SERVER_SETTINGS.map((s) => s.key), ...WORK_COMMAND_SETTINGS.map((s) => s.key)]);
    expect(Object.keys(SAMPLE_FILE).sort()).toEqual([...union].sort());
    // db and shards both name the store: one file may give one of them, never both.
    expect(() => loadServerConfig({ file: configFile(SAMPLE_FILE) })).toThrow(
      /db \(from "db" in the config file\) and shards \(from "shards" in the config file\) both name the store/,
    );
    expect(() => resolveStoreTarget({ config: configFile(SAMPLE_FILE) }, { env: {} })).toThrow(
      /both name the store; give one of them/,
    );
    union.delete('shards');
    const { shards: _shards, ...sample } = SAMPLE_FILE;
    const file = configFile(sample);
    const config = loadServerConfig({ file });
    for (const key of union) {
      if (WORK_ONLY_SETTINGS[key] !== undefined) continue;
      expect(landed(config, key), key).toEqual(SAMPLE_FILE[key]);
    }
    expect([...config.ignoredSettings].sort()).toEqual(Object.keys(WORK_ONLY_SETTINGS).sort());
    // docket work reads the same file, and so does every other database command.
    const work = resolveStoreTarget(
      { config: file },
      { service: true, extraSettings: [...WORK_COMMAND_SETTINGS, ...WORKER_SETTINGS], env: {} },
    );
    expect(work.settings.values).toMatchObject({ leaseMs: 60_000, prefetch: 4, metricsPort: 9464 });
    expect(work.options).toMatchObject({ synchronous: 'full', poolSize: 7, retentionMs: 3_600_000 });
    expect(() => resolveStoreTarget({ config: file }, { env: {} })).not.toThrow();
    // An unknown key is still refused, by both.
    const typo = configFile({ ...sample, leaseMS: 1 });
    expect(() => loadServerConfig({ file: typo })).toThrow(/unknown setting "leaseMS"/);
    expect(() => resolveStoreTarget({ config: typo }, { env: {} })).toThrow(/unknown setting "leaseMS"/);
  });

  it.each([
    [
      { flags: { heartbeatMs: '20000' } },
      /^heartbeatIntervalMs \(from --heartbeat-ms\): \(20000 ms\) must be at most half of leaseMs/,
    ],
    [
      { env: { DOCKET_HEARTBEAT_INTERVAL_MS: '20000' } },
      /^heartbeatIntervalMs \(from \$DOCKET_HEARTBEAT_INTERVAL_MS\): \(20000 ms\) must be at most half/,
    ],
    [
      { flags: { catchAll: 'true', kinds: 'a' } },
      /^kinds \(from --kinds\): worker options catchAll and kinds cannot be combined/,
    ],
    [{ flags: { catchAll: 'maybe' } }, /^catchAll \(from --catch-all\): must be true or false, got "maybe"$/],
    [
      { file: { prefetch: -1 } },
      /^prefetch \(from "prefetch" in the config file\): must be between 0 and 100000, got -1$/,
    ],
    [
      { flags: { concurrency: 'abc' } },
      /^concurrency \(from --concurrency\): must be an integer \(0 runs no local worker\), got "abc"$/,
    ],
    [
      { flags: { concurrency: '200000' } },
      /^concurrency \(from --concurrency\): must be between 1 and 100000, got 200000$/,
    ],
    [
      { flags: { synchronous: 'sometimes' } },
      /^synchronous \(from --synchronous\): must be one of normal, full, got "sometimes"$/,
    ],
    [{ env: { DOCKET_POOL_SIZE: 'ten' } }, /^poolSize \(from \$DOCKET_POOL_SIZE\): must be an integer, got "ten"$/],
    [{ flags: { registryTtlMs: '1' } }, /^registryTtlMs \(from --registry-ttl-ms\): must be between/],
    [{ flags: { id: 'x'.repeat(195) } }, /^id \(from --id\): must be at most 192 characters on a server/],
    [
      { flags: { db: 'postgres://127.0.0.1/test?schema=a', schema: 'b' } },
      /^schema \(from --schema\): names schema "b" but the store URL says \?schema=a/,
    ],
  ])('refuses %j by the library rule, naming the source', (input, message) => {
    const { file, ...rest } = input as {
      file?: unknown;
      flags?: Record<string, unknown>;
      env?: Record<string, string>;
    };
    expect(() => loadServerConfig({ ...rest, file: file === undefined ? undefined : configFile(file) })).toThrow(
      message,
    );
  });

  it('gives the handlers worker queues, kinds, catchAll and id, and the built-in worker <id>-builtin', () => {
    const config = loadServerConfig({
      flags: { id: 'srv', queues: 'a,b', prefetch: '2', leaseMs: '9000', concurrency: '4' },
    });
    const [builtin, handlers] = localWorkerOptions(config, ['report.build']);
    const shared = { prefetch: 2, leaseMs: 9000, concurrency: 4, shutdownGraceMs: 10_000 };
    expect(builtin).toEqual({ ...shared, id: 'srv-builtin', queues: [BUILTIN_QUEUE], kinds: [WEBHOOK_KIND] });
    expect(handlers).toEqual({ ...shared, id: 'srv', queues: ['a', 'b'], kinds: ['report.build'] });
    const catchAll = loadServerConfig({ flags: { catchAll: 'yes' } });
    expect(localWorkerOptions(catchAll, ['report.build'])[1]).toMatchObject({ catchAll: true });
    expect(localWorkerOptions(catchAll, ['report.build'])[1].kinds).toBeUndefined();
    const kinds = loadServerConfig({ env: { DOCKET_KINDS: 'report.build' } });
    expect(localWorkerOptions(kinds, ['report.build', 'other'])[1].kinds).toEqual(['report.build']);
  });
});

describe('a running server honours the store and Docket options (in process)', () => {
  const silent = createServerLogger('silent');

  it('opens SQLite with synchronous and busyTimeoutMs as set, and keeps retentionMs', async () => {
    const db = `sqlite:${join(dir, `sync-${Math.random().toString(36).slice(2)}.db`)}`;
    const defaults = await startServer({
      config: loadServerConfig({ flags: { db, port: '0', concurrency: '0' } }),
      logger: silent,
    });
    try {
      expect((defaults.docket.store as SqliteStore).settings()).toMatchObject({
        synchronous: 'normal',
        busyTimeoutMs: 5000,
      });
    } finally {
      await defaults.close();
    }
    const server = await startServer({
      config: loadServerConfig({
        flags: { db, port: '0', concurrency: '0', synchronous: 'full' },
        env: { DOCKET_BUSY_TIMEOUT_MS: '1234' },
        file: configFile({ retentionMs: 3_600_000 }),
      }),
      logger: silent,
    });
    try {
      expect((server.docket.store as SqliteStore).settings()).toMatchObject({
        synchronous: 'full',
        busyTimeoutMs: 1234,
      });
      expect(server.docket.retentionMs).toBe(3_600_000);
    } finally {
      await server.close();
    }
  });

  it('takes --retention-ms 0 (a job is deleted as it completes) as the library does', async () => {
    const server = await startServer({
      config: loadServerConfig({ flags: { db: 'sqlite::memory:', port: '0', concurrency: '0', retentionMs: '0' } }),
      logger: silent,
    });
    try {
      expect(server.docket.retentionMs).toBe(0);
    } finally {
      await server.close();
    }
  });

  it.each([
    [
      { retentionMs: '-1' },
      /^retentionMs \(from --retention-ms\): must be an integer of 0 or more \(0: a job's row is deleted as it completes\), got -1$/,
    ],
    [{ pruneIntervalMs: '0' }, /^pruneIntervalMs \(from --prune-interval-ms\): must be a positive integer, got 0$/],
    [{ busyTimeoutMs: '-1' }, /^busyTimeoutMs \(from --busy-timeout-ms\): must be a non-negative integer, got -1$/],
    [
      { kinds: 'nobody.handles' },
      /^kinds \(from --kinds\): worker .*option kinds names "nobody\.handles" with no registered handler/,
    ],
  ])('names the source of a value the store, Docket or a worker refuses at start: %j', async (flags, message) => {
    const config = loadServerConfig({ flags: { db: 'sqlite::memory:', port: '0', ...flags } });
    await expect(startServer({ config, logger: silent })).rejects.toThrow(message);
  });
});
