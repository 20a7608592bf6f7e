/**
 * Every setting Docket's commands take, with one name pattern across the three ways to set it:
 * the option name (`leaseMs`) is the config-file key, its kebab-case the flag (`--lease-ms`) and
 * `DOCKET_` plus its SCREAMING_SNAKE_CASE the environment variable (`DOCKET_LEASE_MS`). The lists
 * are checked against the option types with `satisfies Record<keyof …>`, so an option added to
 * `Docket.open` or to a worker cannot be forgotten (test/cli/cli-settings.test.ts walks them).
 *
 * Pure data, shared by both service faces: `docket work` and the other commands (src/cli) and
 * `docket serve` (src/http/server-config.ts) read the same definitions, so a setting has one
 * name and one stated default everywhere. Parsing flags and files stays in src/cli/cli-settings.ts.
 */
import { DEFAULT_PRUNE_INTERVAL_MS, DEFAULT_RETENTION_MS, type DocketOptions } from './docket.js';
import { DEFAULT_REGISTRY_TTL_MS } from './routing/worker-registration.js';
import {
  DEFAULT_CONNECT_ATTEMPT_TIMEOUT_MS,
  DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
  DEFAULT_KEEP_ALIVE_DELAY_MS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type OpenStoreOptions,
} from './store/open-store.js';
import {
  DEFAULT_COMPLETION_BATCH_SIZE,
  DEFAULT_LEASE_MS,
  DEFAULT_LOCAL_POLL_INTERVAL_MS,
  DEFAULT_POLL_INTERVAL_MS,
  IN_PROCESS_COMPLETION_BATCH_SIZE,
  resolveWorkerOptions,
  type WorkerOptions,
} from './worker/worker-options.js';

/** How a setting's text (flag or environment) is read. */
export type SettingKind = 'integer' | 'string' | 'list' | 'boolean' | 'choice';

/** One setting as the CLI spells it. */
export interface CliSetting {
  /** The option name: Docket's, the worker's or the CLI's own; also the config-file key. */
  key: string;
  /** Long flag, e.g. `--lease-ms`. */
  flag: string;
  /** Environment variable, e.g. `DOCKET_LEASE_MS`. */
  env: string;
  kind: SettingKind;
  /** Allowed values of a `choice`. */
  choices?: readonly string[];
  /** What it does, for `--help`. */
  description: string;
  /** The true default, for `--help` (what the library does when it is not set). */
  defaultText: string;
  /** Older flag names still accepted (hidden from `--help`). */
  aliases?: readonly string[];
}

type SettingSpec = Omit<CliSetting, 'key' | 'flag' | 'env'> & { flag?: string; env?: string };

/** `leaseMs` → `--lease-ms`. */
export function flagOf(key: string): string {
  return `--${key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;
}

/** `leaseMs` → `DOCKET_LEASE_MS`. */
export function envOf(key: string): string {
  return `DOCKET_${key.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}`;
}

function settingsOf(specs: Record<string, SettingSpec>): CliSetting[] {
  return Object.entries(specs).map(([key, spec]) => ({
    ...spec,
    key,
    flag: spec.flag ?? flagOf(key),
    env: spec.env ?? envOf(key),
  }));
}

/** Default connect timeout of interactive commands: a down database answers within seconds. */
export const INTERACTIVE_CONNECT_TIMEOUT_MS = 5000;
/** Default connect timeout of long-running commands (`work`): the library's, to ride out a restart. */
export const SERVICE_CONNECT_TIMEOUT_MS = 30_000;

/** Every store option of `Docket.open` (checked against {@link OpenStoreOptions}). */
const STORE_SPECS = {
  shards: {
    kind: 'list',
    description: 'a sharded store: comma-separated postgres:// URLs, one per shard (instead of --db; docs/sharding.md)',
    defaultText: 'none (one store, --db)',
  },
  schema: {
    kind: 'string',
    description: "PostgreSQL schema holding Docket's tables (also ?schema= in --db)",
    defaultText: 'docket',
  },
  poolSize: { kind: 'integer', description: 'PostgreSQL connection pool size', defaultText: '10' },
  connectTimeoutMs: {
    kind: 'integer',
    description: 'PostgreSQL: how long opening retries a server that refuses connections, ms; 0 fails at once',
    defaultText: `${INTERACTIVE_CONNECT_TIMEOUT_MS} (work: ${SERVICE_CONNECT_TIMEOUT_MS})`,
    aliases: ['--connect-timeout'],
  },
  connectAttemptTimeoutMs: {
    kind: 'integer',
    description: 'PostgreSQL: limit on one connection attempt, or a wait for a free pooled connection, ms',
    defaultText: String(DEFAULT_CONNECT_ATTEMPT_TIMEOUT_MS),
  },
  statementTimeoutMs: {
    kind: 'integer',
    description:
      "PostgreSQL: server-side statement_timeout of the pool, ms (migrations and pruning run without); 0 sends none, leaving the server's setting",
    defaultText: String(DEFAULT_STATEMENT_TIMEOUT_MS),
  },
  idleInTransactionTimeoutMs: {
    kind: 'integer',
    description:
      'PostgreSQL: idle_in_transaction_session_timeout, ms: the server ends a session stuck inside a transaction; 0 sends none',
    defaultText: String(DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS),
  },
  keepAliveDelayMs: {
    kind: 'integer',
    description: 'PostgreSQL: idle time before TCP keepalive probes start on every connection, ms',
    defaultText: String(DEFAULT_KEEP_ALIVE_DELAY_MS),
  },
  listenUrl: {
    kind: 'string',
    description:
      'PostgreSQL: URL of the LISTEN connection for wake-ups (e.g. direct, when --db is a transaction pooler); off: no LISTEN, workers poll',
    defaultText: 'the store URL',
  },
  wakeHorizonMs: {
    kind: 'integer',
    description: 'PostgreSQL: a submit wakes listening workers only for jobs due within this many ms',
    defaultText: '5000',
  },
  busyTimeoutMs: {
    kind: 'integer',
    description: "SQLite: how long a writer waits for another process's write lock, ms",
    defaultText: '5000',
  },
  synchronous: {
    kind: 'choice',
    choices: ['normal', 'full'],
    description: 'SQLite durability: normal survives kill -9; full also survives power loss (fsync per commit)',
    defaultText: 'normal',
  },
} as const satisfies Record<keyof OpenStoreOptions, SettingSpec>;

/** The options of `Docket.open` that are neither store options nor objects a CLI cannot pass. */
type DocketOwnSettingKey = Exclude<keyof DocketOptions, keyof OpenStoreOptions | 'url' | 'store' | 'random' | 'logger'>;

const DOCKET_SPECS = {
  retentionMs: {
    kind: 'integer',
    description:
      'how long done and cancelled records are kept before pruning, ms (0: a job is deleted as it completes)',
    defaultText: `${DEFAULT_RETENTION_MS} (7 days)`,
  },
  pruneIntervalMs: {
    kind: 'integer',
    description: 'how often a running worker prunes finished records, ms',
    defaultText: `${DEFAULT_PRUNE_INTERVAL_MS} (10 minutes)`,
  },
  unhandledAfterMs: {
    kind: 'integer',
    description: 'park a due job no live worker has served for this long, ms, with a reason saying so',
    defaultText: 'off (such jobs wait, pending, counted as unhandled)',
  },
} as const satisfies Record<DocketOwnSettingKey, SettingSpec>;

/** The defaults the worker really applies, read from its own resolver so `--help` cannot drift. */
const WORKER_DEFAULTS = resolveWorkerOptions({ id: 'defaults' }, { crossProcessWakeUps: true });

const WORKER_SPECS = {
  id: {
    env: 'DOCKET_WORKER_ID',
    kind: 'string',
    description: 'worker id, stored as lease owner and listed by `docket workers list`',
    defaultText: '<host>-<pid>-<random>',
  },
  concurrency: {
    kind: 'integer',
    description: 'handlers run at once',
    defaultText: String(WORKER_DEFAULTS.concurrency),
  },
  queues: { kind: 'list', description: 'comma-separated queues to claim from', defaultText: 'all queues' },
  kinds: {
    kind: 'list',
    description: 'comma-separated kinds to claim, a subset of the handlers',
    defaultText: 'every kind with a handler',
  },
  catchAll: {
    kind: 'boolean',
    description: 'claim every kind, even without a handler (such jobs fail and are parked)',
    defaultText: 'false',
  },
  registryTtlMs: {
    kind: 'integer',
    description: "how long this worker's registry entry lives without a refresh (refreshed every ttl/6), ms",
    defaultText: String(DEFAULT_REGISTRY_TTL_MS),
  },
  leaseMs: {
    kind: 'integer',
    description: 'lease length per claim and heartbeat, ms',
    defaultText: String(DEFAULT_LEASE_MS),
  },
  heartbeatIntervalMs: {
    kind: 'integer',
    description: 'time between heartbeats, ms; at most lease/2',
    defaultText: `lease/3 (${Math.floor(DEFAULT_LEASE_MS / 3)} for the default lease)`,
    aliases: ['--heartbeat-ms'],
  },
  pollIntervalMs: {
    kind: 'integer',
    description: 'poll for due jobs this often without a wake-up, ms',
    defaultText: `${DEFAULT_LOCAL_POLL_INTERVAL_MS} on SQLite, ${DEFAULT_POLL_INTERVAL_MS} on PostgreSQL (LISTEN/NOTIFY wakes it)`,
    aliases: ['--poll-ms'],
  },
  shutdownGraceMs: {
    kind: 'integer',
    description: 'on stop, how long running handlers may finish before they are aborted, ms',
    defaultText: String(WORKER_DEFAULTS.shutdownGraceMs),
    aliases: ['--grace-ms'],
  },
  prefetch: {
    kind: 'integer',
    description:
      "jobs claimed ahead of free slots and held leased in a local buffer: 'auto' sizes it from the backlog and rate, 0 claims only for free slots",
    defaultText: WORKER_DEFAULTS.prefetchAuto ? 'auto' : String(WORKER_DEFAULTS.prefetch),
  },
  claimBatchSize: {
    kind: 'integer',
    description: 'most jobs leased by one claim',
    defaultText: "min(concurrency + prefetch, 1000), prefetch counting as 500 when 'auto' (1000 on SQLite)",
  },
  maxConcurrentClaims: {
    kind: 'integer',
    description: 'claims in flight at once',
    defaultText: String(WORKER_DEFAULTS.maxConcurrentClaims),
  },
  completionBatchSize: {
    kind: 'integer',
    description: 'most completions written in one round trip',
    defaultText: `${DEFAULT_COMPLETION_BATCH_SIZE} (${IN_PROCESS_COMPLETION_BATCH_SIZE} on SQLite)`,
  },
  completionFlushMs: {
    kind: 'integer',
    description: 'how long a completion waits for others to share its round trip, ms',
    defaultText: String(WORKER_DEFAULTS.completionFlushMs),
  },
} as const satisfies Record<keyof WorkerOptions, SettingSpec>;

/** The store URL: `--db`, `DOCKET_DATABASE_URL`, `db` in the file (the names `docket serve` uses). */
export const DATABASE_SETTING: CliSetting = {
  key: 'db',
  flag: '--db',
  env: 'DOCKET_DATABASE_URL',
  kind: 'string',
  description: 'store URL: postgres://user@host:5432/db[?schema=name] or sqlite:path/to/file.db',
  defaultText: 'sqlite:docket.db',
};

/**
 * The config-file keys only `docket serve` has (its HTTP, token and webhook settings): `docket work`
 * accepts them in a shared config file and ignores them, as they configure no worker. The server's
 * settings table (src/http/server-config.ts) is checked against this list by the compiler.
 */
export const SERVE_ONLY_SETTING_KEYS = [
  'host',
  'port',
  'tokens',
  'bodyLimitBytes',
  'maxLongPollMs',
  'webhookSecret',
  'webhookAllowHosts',
  'webhookAllowAddresses',
  'webhookTimeoutMs',
  'webhookRetryAfterCapMs',
  'receiptSecret',
  'dashboardPath',
] as const;
/** A key of {@link SERVE_ONLY_SETTING_KEYS}. */
export type ServeOnlySettingKey = (typeof SERVE_ONLY_SETTING_KEYS)[number];

/** Store options, in the order `--help` lists them. */
export const STORE_SETTINGS: readonly CliSetting[] = settingsOf(STORE_SPECS);
/** Docket's own options (retention, pruning). */
export const DOCKET_SETTINGS: readonly CliSetting[] = settingsOf(DOCKET_SPECS);
/** Worker options. */
export const WORKER_SETTINGS: readonly CliSetting[] = settingsOf(WORKER_SPECS);
/** The option names each list covers, for tests that compare them with the option types. */
export const SETTING_KEYS = {
  store: Object.keys(STORE_SPECS) as (keyof OpenStoreOptions)[],
  docket: Object.keys(DOCKET_SPECS) as DocketOwnSettingKey[],
  worker: Object.keys(WORKER_SPECS) as (keyof WorkerOptions)[],
};
