/**
 * Every setting reachable from the CLI: each `Docket.open` option and each worker option has a
 * flag, an environment variable and a config-file key with one name pattern, and `--help` states
 * the default the library really applies. The option names are read from the library itself (the
 * lists its unknown-option errors print), so an option added there without a CLI setting fails here.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from '@commander-js/extra-typings';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DATABASE_SETTING,
  DOCKET_SETTINGS,
  envOf,
  flagOf,
  SETTING_KEYS,
  STORE_SETTINGS,
  WORKER_SETTINGS,
} from '../../src/cli/cli-settings.js';
import { WORK_COMMAND_SETTINGS } from '../../src/cli/commands/work-command.js';
import { resolveStoreTarget } from '../../src/cli/open-cli-docket.js';
import { createProgram } from '../../src/cli/run-cli.js';
import { Docket } from '../../src/docket.js';
import { resolveWorkerOptions } from '../../src/worker/worker-options.js';
import { commandAt, knownOptionNames } from '../support/cli-introspection.js';
import { runDocketInProcess } from './run-docket.js';

describe('the settings cover every option', () => {
  it('has a setting for every worker option the worker accepts', async () => {
    const known = await knownOptionNames(() => resolveWorkerOptions({ notAnOption: 1 } as never));
    expect([...SETTING_KEYS.worker].sort()).toEqual(known);
    expect(WORKER_SETTINGS.map((s) => s.key).sort()).toEqual(known);
  });

  it('has a setting for every Docket.open option a command line can carry', async () => {
    const known = await knownOptionNames(() => Docket.open({ notAnOption: 1 } as never));
    // url is --db; store, random and logger are objects only code can pass.
    const cliOnly = known.filter((name) => !['url', 'store', 'random', 'logger'].includes(name));
    expect([...SETTING_KEYS.store, ...SETTING_KEYS.docket].sort()).toEqual(cliOnly);
    expect(known).toContain('url');
    expect(DATABASE_SETTING.flag).toBe('--db');
  });

  it('names each flag, variable and file key by one pattern', () => {
    for (const setting of [...STORE_SETTINGS, ...DOCKET_SETTINGS, ...WORKER_SETTINGS, ...WORK_COMMAND_SETTINGS]) {
      expect(setting.flag, setting.key).toBe(flagOf(setting.key));
      // The worker id's variable is DOCKET_WORKER_ID: DOCKET_ID would not say whose id it is.
      expect(setting.env, setting.key).toBe(setting.key === 'id' ? 'DOCKET_WORKER_ID' : envOf(setting.key));
    }
    expect(flagOf('heartbeatIntervalMs')).toBe('--heartbeat-interval-ms');
    expect(envOf('maxConcurrentClaims')).toBe('DOCKET_MAX_CONCURRENT_CLAIMS');
  });

  it('offers every setting as a flag of docket work, with its default and variable in --help', () => {
    const work = commandAt(['work']);
    const help = work.helpInformation();
    for (const setting of [DATABASE_SETTING, ...STORE_SETTINGS, ...DOCKET_SETTINGS, ...WORKER_SETTINGS]) {
      expect(
        work.options.some((option) => option.long === setting.flag),
        setting.flag,
      ).toBe(true);
      expect(help, setting.flag).toContain(`$${setting.env}`);
    }
    expect(help).toContain('--config');
  });

  it('states the defaults the library really applies', () => {
    const sqlite = resolveWorkerOptions({}, { crossProcessWakeUps: false, inProcessStore: true });
    const postgres = resolveWorkerOptions({}, { crossProcessWakeUps: true });
    const help = commandAt(['work']).helpInformation().replace(/\s+/g, ' ');
    const defaultOf = (flag: string) => new RegExp(`${flag} <[a-z]+>.*?\\(default: ([^;]*);`).exec(help)?.[1];
    expect(defaultOf('--concurrency')).toBe(String(postgres.concurrency));
    expect(defaultOf('--lease-ms')).toBe(String(postgres.leaseMs));
    expect(defaultOf('--heartbeat-interval-ms')).toContain(`lease/3 (${postgres.heartbeatIntervalMs}`);
    expect(resolveWorkerOptions({ leaseMs: 9000 }).heartbeatIntervalMs).toBe(3000);
    expect(defaultOf('--poll-interval-ms')).toBe(
      `${sqlite.pollIntervalMs} on SQLite, ${postgres.pollIntervalMs} on PostgreSQL (LISTEN/NOTIFY wakes it)`,
    );
    expect(defaultOf('--shutdown-grace-ms')).toBe(String(postgres.shutdownGraceMs));
    expect(postgres.prefetchAuto).toBe(true);
    expect(defaultOf('--prefetch')).toBe('auto');
    expect(defaultOf('--claim-batch-size')).toBe(
      "min(concurrency + prefetch, 1000), prefetch counting as 500 when 'auto' (1000 on SQLite)",
    );
    expect(resolveWorkerOptions({ concurrency: 7, prefetch: 5 }).claimBatchSize).toBe(12);
    expect(resolveWorkerOptions({ concurrency: 7 }).claimBatchSize).toBe(507);
    expect(
      resolveWorkerOptions({ concurrency: 7 }, { crossProcessWakeUps: false, inProcessStore: true }).claimBatchSize,
    ).toBe(1000);
    expect(
      resolveWorkerOptions({ concurrency: 7, prefetch: 5 }, { crossProcessWakeUps: false, inProcessStore: true })
        .claimBatchSize,
    ).toBe(12);
    expect(resolveWorkerOptions({ concurrency: 7, prefetch: 'auto' }).prefetchAuto).toBe(true);
    expect(resolveWorkerOptions({ prefetch: 0 }).prefetchAuto).toBe(false);
    expect(defaultOf('--max-concurrent-claims')).toBe(String(postgres.maxConcurrentClaims));
    expect(defaultOf('--completion-batch-size')).toBe(
      `${postgres.completionBatchSize} (${sqlite.completionBatchSize} on SQLite)`,
    );
    expect([postgres.completionBatchSize, sqlite.completionBatchSize]).toEqual([500, 1000]);
    expect(defaultOf('--completion-flush-ms')).toBe(String(postgres.completionFlushMs));
    expect(defaultOf('--registry-ttl-ms')).toBe(String(postgres.registryTtlMs));
    expect(defaultOf('--connect-timeout-ms')).toBe('30000');
    expect(commandAt(['stats']).helpInformation().replace(/\s+/g, ' ')).toMatch(
      /--connect-timeout-ms <ms>.*\(default: 5000;/,
    );
  });

  it('gives every database command --schema, --connect-timeout-ms, every store option and --config', () => {
    const walk = (command: Command, path: string[]): string[][] => {
      const found = command.options.some((option) => option.long === '--db') ? [path] : [];
      return [...found, ...command.commands.flatMap((sub) => walk(sub as Command, [...path, sub.name()]))];
    };
    const paths = walk(createProgram() as unknown as Command, []).filter(
      (path) => !['serve', 'demo'].includes(path[0] ?? ''),
    );
    expect(paths.length).toBeGreaterThanOrEqual(20);
    for (const path of paths) {
      const command = commandAt(path);
      for (const flag of [...STORE_SETTINGS.map((s) => s.flag), '--config', '--connect-timeout']) {
        expect(
          command.options.some((option) => option.long === flag),
          `${path.join(' ')} ${flag}`,
        ).toBe(true);
      }
    }
  });
});

describe('flags win over the environment, which wins over the config file', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-settings-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reaches every setting from each of the three sources', () => {
    const settings = [...STORE_SETTINGS, ...DOCKET_SETTINGS, ...WORKER_SETTINGS];
    const sample = (kind: string, choices?: readonly string[]) =>
      kind === 'integer' ? 1234 : kind === 'list' ? ['a', 'b'] : kind === 'boolean' ? true : (choices?.[1] ?? 'text');
    const text = (value: unknown) => (Array.isArray(value) ? value.join(',') : String(value));
    for (const setting of settings) {
      const value = sample(setting.kind, setting.choices);
      const file = join(dir, `${setting.key}.json`);
      writeFileSync(file, JSON.stringify({ [setting.key]: value }));
      const fromFile = resolveStoreTarget({ config: file }, { extraSettings: WORKER_SETTINGS, env: {} });
      const fromEnv = resolveStoreTarget({}, { extraSettings: WORKER_SETTINGS, env: { [setting.env]: text(value) } });
      const flagName = setting.flag.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      const fromFlag = resolveStoreTarget({ [flagName]: text(value) }, { extraSettings: WORKER_SETTINGS, env: {} });
      for (const [source, target] of [
        ['file', fromFile],
        ['env', fromEnv],
        ['flag', fromFlag],
      ] as const) {
        expect(target.settings.values[setting.key], `${setting.key} from ${source}`).toEqual(value);
        expect(target.settings.sources.get(setting.key)?.from, setting.key).toBe(source);
      }
    }
  });

  it('orders the sources flag > environment > file, and refuses unknown file keys', () => {
    const file = join(dir, 'order.json');
    writeFileSync(file, JSON.stringify({ leaseMs: 1000, concurrency: 2, prefetch: 3 }));
    const target = resolveStoreTarget(
      { config: file, leaseMs: '5000' },
      { extraSettings: WORKER_SETTINGS, env: { DOCKET_LEASE_MS: '4000', DOCKET_CONCURRENCY: '6' } },
    );
    expect(target.settings.values).toMatchObject({ leaseMs: 5000, concurrency: 6, prefetch: 3 });
    writeFileSync(file, JSON.stringify({ leaseMS: 1000 }));
    expect(() => resolveStoreTarget({ config: file }, { env: {} })).toThrow(/unknown setting "leaseMS"/);
  });

  it('takes the connect timeout from --connect-timeout too, with a short default for interactive commands', () => {
    expect(resolveStoreTarget({}, { env: {} }).options.connectTimeoutMs).toBe(5000);
    expect(resolveStoreTarget({}, { env: {}, service: true }).options.connectTimeoutMs).toBe(30_000);
    expect(resolveStoreTarget({ connectTimeout: '250' }, { env: {} }).options.connectTimeoutMs).toBe(250);
  });

  it('refuses a --schema that contradicts the URL, and a bad choice, with exit 2', async () => {
    const conflict = await runDocketInProcess(['stats', '--db', 'postgres://127.0.0.1/test?schema=a', '--schema', 'b']);
    expect(conflict.code).toBe(2);
    expect(conflict.stderr).toContain('names schema "b" but the store URL says ?schema=a');
    const choice = await runDocketInProcess(['stats', '--db', 'sqlite::memory:', '--synchronous', 'sometimes']);
    expect(choice.code).toBe(2);
    expect(choice.stderr).toContain("argument 'sometimes' is invalid");
  });
});
