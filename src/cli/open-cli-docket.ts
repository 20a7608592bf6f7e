/**
 * Where the CLI's Docket comes from: `--db`, else DOCKET_DATABASE_URL, else `db` in the config
 * file, else `sqlite:docket.db`; every store option likewise (see cli-settings.ts). Every command
 * opens one Docket, does its work through Docket's admin operations (never SQL) and closes it, so
 * a command leaves no connection or lock behind.
 *
 * Commands that only read open an existing store only: a mistyped `--db` is an error naming the
 * URL, never a new empty `docket.db` (or PostgreSQL schema) that answers "no jobs".
 */
import { type Command, Option } from '@commander-js/extra-typings';
import { Docket } from '../docket.js';
import { inspectStore, type OpenStoreOptions, parseStoreUrl, redactStoreUrl } from '../store/open-store.js';
import { failure, usageError } from './cli-error.js';
import type { CliLogger } from './cli-logger.js';
import {
  type CliSetting,
  configOption,
  DATABASE_SETTING,
  DOCKET_SETTINGS,
  INTERACTIVE_CONNECT_TIMEOUT_MS,
  optionFor,
  type ResolvedSettings,
  resolveSettings,
  SERVE_ONLY_SETTING_KEYS,
  SERVICE_CONNECT_TIMEOUT_MS,
  STORE_SETTINGS,
  WORKER_SETTINGS,
  withSettingSource,
} from './cli-settings.js';

/** The store URL used when neither `--db`, DOCKET_DATABASE_URL nor the config file names one. */
export const DEFAULT_DATABASE_URL = 'sqlite:docket.db';

/**
 * Keys of a config file shared with `docket serve` or `docket work` that a command may not use
 * itself: serve's own settings and the worker options, accepted (and ignored) where they do not apply.
 */
const SERVE_FILE_KEYS: ReadonlySet<string> = new Set([
  ...SERVE_ONLY_SETTING_KEYS,
  ...WORKER_SETTINGS.map((setting) => setting.key),
]);

/** How a command uses its store. */
export type StoreAccess =
  /** Reads only: the store must exist with Docket's current schema; nothing is created or migrated. */
  | 'read'
  /** Changes existing records: the store must exist (it is migrated if outdated). */
  | 'write'
  /** May create the store and its schema (submit, schedules create, work, migrate). */
  | 'create';

/** The settings every database command resolves: the URL, the store options and the config file. */
export const DATABASE_COMMAND_SETTINGS: readonly CliSetting[] = [DATABASE_SETTING, ...STORE_SETTINGS];

/** The `--db` options created by {@link databaseOption}, so {@link addStoreOptions} finds their commands. */
const DATABASE_OPTIONS = new WeakSet<object>();

/** The `--db <url>` option every database command takes; {@link addStoreOptions} adds the rest. */
export function databaseOption(): Option {
  const [option] = optionFor(DATABASE_SETTING);
  if (!option) throw new Error('docket: the --db option is missing');
  DATABASE_OPTIONS.add(option);
  return option;
}

/** Commands that run for a long time: the library's longer connect timeout applies. */
const SERVICE_COMMANDS = new Set(['work']);

/**
 * Adds every store option's flag (`--schema`, `--connect-timeout-ms`, …) and `--config` to each
 * command that took {@link databaseOption}: one place, so no database command can lack one.
 */
export function addStoreOptions(command: Command): void {
  if (command.options.some((option) => DATABASE_OPTIONS.has(option))) {
    const service = SERVICE_COMMANDS.has(command.name());
    for (const setting of STORE_SETTINGS) {
      const defaultText =
        setting.key === 'connectTimeoutMs'
          ? String(service ? SERVICE_CONNECT_TIMEOUT_MS : INTERACTIVE_CONNECT_TIMEOUT_MS)
          : undefined;
      for (const option of optionFor(setting, defaultText)) command.addOption(option);
    }
    if (!command.options.some((option) => option.long === '--config')) command.addOption(configOption());
  }
  for (const sub of command.commands) addStoreOptions(sub as Command);
}

/** The `--json` option: machine-readable output on stdout. */
export function jsonOption() {
  return new Option('--json', 'print JSON instead of a table');
}

/** The URL a command should open, from a flag value or the environment (config files aside). */
export function resolveDatabaseUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag !== undefined && flag !== '') return flag;
  const fromEnv = env.DOCKET_DATABASE_URL;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_DATABASE_URL;
}

/**
 * The PostgreSQL schema named by a `?schema=` query parameter, if any. Read here as well as by the
 * store so `--db postgres://…?schema=x` always means the same schema, whichever layer parses it.
 */
export function schemaFromUrl(url: string): string | undefined {
  if (!/^postgres(ql)?:\/\//i.test(url)) return undefined;
  try {
    return new URL(url).searchParams.get('schema') ?? undefined;
  } catch {
    return undefined;
  }
}

/** `--db` or `$DOCKET_DATABASE_URL` or `"db" in docket.json`, as a message names a setting's source. */
function describeSourceName(source: { from: string; name: string }): string {
  return source.from === 'env'
    ? `$${source.name}`
    : source.from === 'file'
      ? `"${source.name}" in the config file`
      : source.name;
}

/** A command's parsed options, of which the store's are read. */
export type StoreFlags = Record<string, unknown>;

/** What a command opens: the URL, the options for `Docket.open` and where each came from. */
export interface StoreTarget {
  /** The single store's URL; undefined for a sharded store (`options.shards`). */
  url: string | undefined;
  options: OpenStoreOptions & { retentionMs?: number; pruneIntervalMs?: number };
  settings: ResolvedSettings;
}

/**
 * Resolves the store a command opens from its parsed flags, the environment and the config file.
 * `extraSettings` are resolved from the same sources (worker options for `work`).
 */
export function resolveStoreTarget(
  flags: Record<string, unknown>,
  options: { service?: boolean; extraSettings?: readonly CliSetting[]; env?: NodeJS.ProcessEnv } = {},
): StoreTarget {
  const env = options.env ?? process.env;
  const settings = resolveSettings({
    settings: [...DATABASE_COMMAND_SETTINGS, ...DOCKET_SETTINGS, ...(options.extraSettings ?? [])],
    flags,
    env,
    extraFileKeys: new Set([...SERVE_FILE_KEYS, 'handlers', 'logLevel', 'metricsPort', 'metricsHost']),
  });
  const values = settings.values;
  const storeOptions: Record<string, unknown> = {};
  for (const setting of [...STORE_SETTINGS, ...DOCKET_SETTINGS]) {
    if (values[setting.key] !== undefined) storeOptions[setting.key] = values[setting.key];
  }
  const dbGiven = typeof values.db === 'string' && values.db !== '';
  if (storeOptions.shards !== undefined) {
    // A sharded store has no single URL: --db (or its environment/file setting) beside it is refused.
    if (dbGiven) {
      const db = settings.sources.get('db');
      const shards = settings.sources.get('shards');
      throw usageError(
        `${db ? describeSourceName(db) : '--db'} and ${shards ? describeSourceName(shards) : '--shards'} both name the store; give one of them`,
      );
    }
    storeOptions.connectTimeoutMs ??= options.service ? SERVICE_CONNECT_TIMEOUT_MS : INTERACTIVE_CONNECT_TIMEOUT_MS;
    return { url: undefined, options: storeOptions as StoreTarget['options'], settings };
  }
  const url = dbGiven ? (values.db as string) : DEFAULT_DATABASE_URL;
  const fromUrl = schemaFromUrl(url);
  if (fromUrl !== undefined) {
    if (storeOptions.schema !== undefined && storeOptions.schema !== fromUrl) {
      const source = settings.sources.get('schema');
      throw usageError(
        `${source ? `${source.from === 'env' ? '$' : ''}${source.name}` : '--schema'} names schema "${String(storeOptions.schema)}" but the store URL says ?schema=${fromUrl}; give one of them`,
      );
    }
    storeOptions.schema = fromUrl;
  }
  storeOptions.connectTimeoutMs ??= options.service ? SERVICE_CONNECT_TIMEOUT_MS : INTERACTIVE_CONNECT_TIMEOUT_MS;
  return { url, options: storeOptions as StoreTarget['options'], settings };
}

/**
 * Checks, without creating or changing anything, that the store exists (and, for `read`, has
 * Docket's current schema). Throws a CliError (exit 1) naming the URL otherwise.
 */
export async function requireExistingStore(target: StoreTarget, access: 'read' | 'write'): Promise<void> {
  if (target.url === undefined) {
    // A sharded store exists when every shard does.
    for (const shard of target.options.shards ?? []) {
      await requireExistingStore({ ...target, url: shard, options: { ...target.options, shards: undefined } }, access);
    }
    return;
  }
  const shown = redactStoreUrl(target.url);
  const location = parseStoreUrl(target.url);
  let inspection: Awaited<ReturnType<typeof inspectStore>>;
  try {
    inspection = await inspectStore(target.url, {
      schema: target.options.schema,
      connectTimeoutMs: target.options.connectTimeoutMs,
    });
  } catch (error) {
    throw failure(`cannot open the store ${shown}: ${(error as Error).message}`);
  }
  const where = location.kind === 'postgres' ? `schema "${inspection.schema}" of ${shown}` : shown;
  if (!inspection.exists) {
    throw failure(
      location.kind === 'sqlite'
        ? `no Docket store at ${shown}: the file ${location.path} does not exist (check --db or $DOCKET_DATABASE_URL; \`docket migrate\` creates a store)`
        : `no Docket store at ${where}: the schema does not exist (check --db, --schema or $DOCKET_SCHEMA; \`docket migrate\` creates a store)`,
    );
  }
  if (!inspection.hasDocketSchema) {
    throw failure(`${where} has no Docket schema (no migration table): is this the right database?`);
  }
  if (access === 'read' && inspection.pending.length > 0) {
    throw failure(
      `${where} needs schema migration${inspection.pending.length === 1 ? '' : 's'} ${inspection.pending.map((m) => m.version).join(', ')} ` +
        'before this version of docket can read it; a read never migrates: run `docket migrate` first',
    );
  }
}

/** Opens Docket on a resolved target, after checking the store exists when `access` requires it. */
export async function openTarget(target: StoreTarget, access: StoreAccess, logger?: CliLogger): Promise<Docket> {
  if (access !== 'create') await requireExistingStore(target, access);
  try {
    return await Docket.open({ url: target.url, ...target.options, ...(logger ? { logger: logger.docket } : {}) });
  } catch (error) {
    if (error instanceof Error && error.name === 'ConfigurationError') {
      error.message = withSettingSource(error.message, target.settings.sources);
    }
    throw error;
  }
}

/** Opens Docket for a command, from its parsed flags. */
export async function openCliDocket(
  flags: Record<string, unknown>,
  access: StoreAccess,
  options: { logger?: CliLogger; service?: boolean } = {},
): Promise<Docket> {
  const target = resolveStoreTarget(flags, { service: options.service });
  return openTarget(target, access, options.logger);
}

/** Runs `body` with an open Docket and always closes it, even when `body` throws. */
export async function withDocket<T>(
  flags: Record<string, unknown>,
  access: StoreAccess,
  body: (docket: Docket) => Promise<T>,
): Promise<T> {
  const docket = await openCliDocket(flags, access);
  try {
    return await body(docket);
  } finally {
    await docket.close();
  }
}
