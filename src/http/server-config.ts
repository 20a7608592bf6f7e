/**
 * `docket serve` configuration: each setting comes from a flag, else an environment variable,
 * else the optional JSON config file, else its default, and is validated before anything starts.
 * Errors name the setting and where its value came from, e.g.
 *   port (from --port): must be an integer from 0 to 65535, got "80a"
 * Secrets (tokens, the webhook signing secret) have no flag on purpose: flags show up in `ps`
 * and shell history; they come from the environment or the file.
 *
 * Every store option, every Docket option and every worker option is a setting here too, built
 * from the very lists `docket work` uses (src/cli/cli-settings.ts): the same flag, environment
 * variable and config-file key, the same true default, and the library's own validation. So one
 * config file configures both commands: each key is honoured wherever it applies, the keys only
 * `serve` has are accepted and ignored by `work` (they configure no worker), and the two keys
 * only `work` has (its separate metrics endpoint) are accepted here and ignored with a logged
 * notice, since `serve` answers `/metrics` on its own port.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';
import type { DocketOptions } from '../docket.js';
import { BUILTIN_QUEUE, WEBHOOK_KIND } from '../job/builtin-kinds.js';
import { ConfigurationError, ValidationError } from '../job/errors.js';
import {
  type CliSetting,
  DATABASE_SETTING,
  DOCKET_SETTINGS,
  SERVICE_CONNECT_TIMEOUT_MS,
  type ServeOnlySettingKey,
  STORE_SETTINGS,
  WORKER_SETTINGS,
} from '../settings.js';
import { resolveWorkerOptions, type WorkerOptions } from '../worker/worker-options.js';
import { type ApiToken, SCOPES } from './auth.js';
import { DestinationGuard } from './ssrf-guard.js';

/** Log levels accepted by `logLevel`. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** The Docket options a server passes to `Docket.open` besides `url` and `schema`. */
export type ServerDocketOptions = Omit<DocketOptions, 'url' | 'store' | 'random' | 'logger' | 'schema'>;
/** The worker options of the local workers besides those {@link ServerConfig} holds itself. */
export type ServerWorkerOptions = Omit<WorkerOptions, 'concurrency' | 'queues' | 'leaseMs' | 'shutdownGraceMs'>;

/** The validated configuration of a Docket server. */
export interface ServerConfig {
  /** Store URL: `sqlite:path.db`, `sqlite::memory:` or `postgres://…`; undefined with `docketOptions.shards`. */
  db: string | undefined;
  /** PostgreSQL schema; undefined for the store's default. */
  schema: string | undefined;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Bearer tokens; empty means no authentication (allowed on loopback only). */
  tokens: ApiToken[];
  /** Handlers each local worker runs at once; 0 runs no worker in this process. */
  concurrency: number;
  /** Queues the handlers worker serves; undefined for all. The built-in worker serves `docket.builtin`. */
  queues: string[] | undefined;
  /** Lease length of the local workers, ms. */
  leaseMs: number;
  /** Largest request body accepted, in bytes. */
  bodyLimitBytes: number;
  /** Longest a remote worker's claim may wait for a job. */
  maxLongPollMs: number;
  logLevel: (typeof LOG_LEVELS)[number];
  /** HMAC secret that signs webhook requests; webhook jobs are disabled without it. */
  webhookSecret: string | undefined;
  webhookAllowHosts: string[];
  webhookAllowAddresses: string[];
  webhookTimeoutMs: number;
  webhookRetryAfterCapMs: number;
  /** Secret of remote-worker lease receipts; random per process when unset (see docs/http-api.md). */
  receiptSecret: string | undefined;
  /** A handlers module (`docket serve --handlers FILE`) whose kinds get a local worker; none when unset. */
  handlers: string | undefined;
  /** How long a graceful stop lets in-flight requests, then running handlers, finish, ms. */
  shutdownGraceMs: number;
  /** Store options, retention, pruning and unhandled parking for `Docket.open`; only those set. */
  docketOptions: ServerDocketOptions;
  /** The other worker options of the local workers (prefetch, heartbeat, poll, …); only those set. */
  workerOptions: ServerWorkerOptions;
  /** Where each setting that was set came from, e.g. `leaseMs` → `from --lease-ms`. */
  sources: ReadonlyMap<string, string>;
  /** Config-file keys that only `docket work` honours, present in the file and ignored here (logged at start). */
  ignoredSettings: readonly string[];
}

/** Which part of the process a setting configures, for `--help` and the docs. */
export type SettingGroup = 'server' | 'store' | 'docket' | 'worker';

interface Setting {
  key: string;
  group: SettingGroup;
  /** The long flag; undefined for secrets, which come from the environment or the file only. */
  flag: string | undefined;
  aliases: readonly string[];
  env: string;
  kind: CliSetting['kind'];
  description: string;
  defaultText: string;
  /** Converts a text value (flag or environment) into the JSON-like value the schema checks. */
  fromText: (text: string) => unknown;
  schema: z.ZodType;
  /** The value when unset; undefined leaves the option out (the library's default applies). */
  fallback: unknown;
}

/** A setting as `docket serve --help` and the docs describe it. */
export interface ServerSettingInfo extends Omit<CliSetting, 'flag'> {
  group: SettingGroup;
  /** Undefined for secrets (environment or config file only). */
  flag: string | undefined;
}

const text = (value: string): unknown => value;
const integerText = (value: string): unknown => (/^[+-]?\d+$/.test(value.trim()) ? Number(value.trim()) : value);
const listText = (value: string): unknown =>
  value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
const booleanText = (value: string): unknown => {
  const lowered = value.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(lowered)) return true;
  if (['false', '0', 'no', 'off'].includes(lowered)) return false;
  return value;
};

const msSchema = (min: number, max: number) =>
  z
    .number({ error: (issue) => `must be an integer number of milliseconds, got ${show(issue.input)}` })
    .int({ error: (issue) => `must be an integer, got ${show(issue.input)}` })
    .min(min, { error: `must be at least ${min}` })
    .max(max, { error: `must be at most ${max}` });

const tokenSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, { error: 'must be 1-64 letters, digits or _ . : -' }),
  token: z.string().min(16, { error: 'must be at least 16 characters (use a random secret)' }),
  scopes: z.array(z.enum(SCOPES, { error: `must be one of ${SCOPES.join(', ')}` })).min(1, { error: 'give a scope' }),
});

function parseTokensText(value: string): unknown {
  const trimmed = value.trim();
  if (trimmed.startsWith('[')) {
    try {
      return JSON.parse(trimmed);
    } catch {
      return value;
    }
  }
  // Compact form: "name:scope+scope:secret" entries separated by whitespace. The secret is
  // everything after the second colon, so it may itself contain colons.
  return trimmed
    .split(/\s+/)
    .filter((entry) => entry !== '')
    .map((entry) => {
      const first = entry.indexOf(':');
      const second = first < 0 ? -1 : entry.indexOf(':', first + 1);
      if (second < 0) return entry;
      return {
        name: entry.slice(0, first),
        scopes: entry.slice(first + 1, second).split('+'),
        token: entry.slice(second + 1),
      };
    });
}

type ServeOnlySpec = Pick<Setting, 'flag' | 'env' | 'kind' | 'description' | 'defaultText' | 'fromText' | 'schema'> & {
  fallback: unknown;
};

const portError = (issue: { input: unknown }) => `must be an integer from 0 to 65535, got ${show(issue.input)}`;

/**
 * The settings only a server has. Checked against the list `docket work` accepts in a shared
 * config file (SERVE_ONLY_SETTING_KEYS): one added here without it fails to compile.
 */
const SERVE_ONLY_SPECS = {
  host: {
    flag: '--host',
    env: 'DOCKET_HOST',
    kind: 'string',
    description: 'address to listen on; anything but loopback needs tokens',
    defaultText: '127.0.0.1',
    fromText: text,
    schema: z.string().min(1, { error: 'must not be empty' }),
    fallback: '127.0.0.1',
  },
  port: {
    flag: '--port',
    env: 'DOCKET_PORT',
    kind: 'integer',
    description: 'port to listen on; 0 picks a free one',
    defaultText: '8080',
    fromText: integerText,
    schema: z
      .number({ error: portError })
      .int({ error: portError })
      .min(0, { error: portError })
      .max(65535, { error: portError }),
    fallback: 8080,
  },
  tokens: {
    flag: undefined,
    env: 'DOCKET_TOKENS',
    kind: 'string',
    description: 'bearer tokens "name:scope+scope:secret ..." (environment or file only)',
    defaultText: 'none (loopback only, no authentication)',
    fromText: parseTokensText,
    schema: z.array(tokenSchema, {
      error: 'must be a list of {name, token, scopes}, or "name:scope+scope:secret" entries',
    }),
    fallback: [],
  },
  bodyLimitBytes: {
    flag: '--body-limit-bytes',
    env: 'DOCKET_BODY_LIMIT_BYTES',
    kind: 'integer',
    description: 'largest request body accepted, bytes',
    defaultText: '1048576 (1 MiB)',
    fromText: integerText,
    schema: z
      .number({ error: (issue) => `must be an integer number of bytes, got ${show(issue.input)}` })
      .int()
      .min(1024, { error: 'must be at least 1024' })
      .max(64 * 1024 * 1024, { error: 'must be at most 67108864 (64 MiB)' }),
    fallback: 1024 * 1024,
  },
  maxLongPollMs: {
    flag: '--max-long-poll-ms',
    env: 'DOCKET_MAX_LONG_POLL_MS',
    kind: 'integer',
    description: "longest wait a remote worker's claim may ask for, ms",
    defaultText: '30000',
    fromText: integerText,
    schema: msSchema(0, 300_000),
    fallback: 30_000,
  },
  webhookSecret: {
    flag: undefined,
    env: 'DOCKET_WEBHOOK_SECRET',
    kind: 'string',
    description: 'HMAC secret that signs webhook deliveries (environment or file only)',
    defaultText: 'none (webhook jobs disabled)',
    fromText: text,
    schema: z.string().min(16, { error: 'must be at least 16 characters (use a random secret)' }),
    fallback: undefined,
  },
  webhookAllowHosts: {
    flag: '--webhook-allow-hosts',
    env: 'DOCKET_WEBHOOK_ALLOW_HOSTS',
    kind: 'list',
    description: 'hosts webhooks may call: exact, *.domain or *, comma-separated',
    defaultText: 'none',
    fromText: listText,
    schema: z.array(
      z.string().regex(/^(\*|(\*\.)?[A-Za-z0-9.:[\]-]+)$/, {
        error: 'entries are host names, *.domain or * (any public host)',
      }),
    ),
    fallback: [],
  },
  webhookAllowAddresses: {
    flag: '--webhook-allow-addresses',
    env: 'DOCKET_WEBHOOK_ALLOW_ADDRESSES',
    kind: 'list',
    description: 'private or loopback CIDRs webhooks may nevertheless call, comma-separated',
    defaultText: 'none',
    fromText: listText,
    schema: z.array(
      z.string().superRefine((value, ctx) => {
        try {
          DestinationGuard.checkCidr(value);
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: (error as Error).message });
        }
      }),
    ),
    fallback: [],
  },
  webhookTimeoutMs: {
    flag: '--webhook-timeout-ms',
    env: 'DOCKET_WEBHOOK_TIMEOUT_MS',
    kind: 'integer',
    description: 'per-request timeout of a webhook delivery, ms',
    defaultText: '10000',
    fromText: integerText,
    schema: msSchema(100, 300_000),
    fallback: 10_000,
  },
  webhookRetryAfterCapMs: {
    flag: '--webhook-retry-after-cap-ms',
    env: 'DOCKET_WEBHOOK_RETRY_AFTER_CAP_MS',
    kind: 'integer',
    description: 'longest Retry-After honoured on 429/503, ms',
    defaultText: '3600000 (1 hour)',
    fromText: integerText,
    schema: msSchema(0, 7 * 24 * 3_600_000),
    fallback: 3_600_000,
  },
  receiptSecret: {
    flag: undefined,
    env: 'DOCKET_RECEIPT_SECRET',
    kind: 'string',
    description: 'secret of remote-worker lease receipts, shared by servers of one database (environment or file only)',
    defaultText: 'random per process',
    fromText: text,
    schema: z.string().min(16, { error: 'must be at least 16 characters (use a random secret)' }),
    fallback: undefined,
  },
} as const satisfies Record<ServeOnlySettingKey, ServeOnlySpec>;

/**
 * Keys of `docket work`'s own settings that a server does not honour, with the reason: accepted in
 * a shared config file (so the file stays valid for both commands), reported at start, never
 * silently dropped. test/http/server-config.test.ts checks every `work` key is honoured or listed.
 */
export const WORK_ONLY_SETTINGS: Readonly<Record<string, string>> = {
  metricsPort: 'docket serve answers GET /metrics on its own port (--port); the separate endpoint is for docket work',
  metricsHost:
    'docket serve answers GET /metrics on its own address (--host); the separate endpoint is for docket work',
};

/**
 * What a shared setting means for a server, where that differs from `docket work`'s wording:
 * the server runs up to two local workers (the built-in one, for webhook jobs on docket.builtin,
 * and the handlers one, for the kinds of --handlers), and every worker option applies to both
 * unless said otherwise here.
 */
const SERVE_MEANINGS: Readonly<Record<string, { description?: string; defaultText?: string }>> = {
  connectTimeoutMs: {
    description: 'PostgreSQL: how long opening retries a server that refuses connections, ms; 0 fails at once',
    defaultText: String(SERVICE_CONNECT_TIMEOUT_MS),
  },
  id: {
    description: 'id of the handlers worker; the built-in worker is <id>-builtin (lease owner, `docket workers list`)',
  },
  concurrency: { description: 'handlers run at once by each local worker; 0 runs no local worker' },
  queues: {
    description: 'queues the handlers worker claims from, comma-separated (the built-in worker serves docket.builtin)',
  },
  kinds: { description: 'kinds of --handlers the handlers worker claims, comma-separated' },
  catchAll: {
    description:
      'the handlers worker claims every kind on --queues, even without a handler (such jobs fail and are parked, ' +
      'so remote workers no longer get them)',
  },
  shutdownGraceMs: {
    description:
      'on SIGTERM, how long in-flight requests may finish before their sockets are cut, then how long ' +
      'running handlers may finish before they are aborted, ms',
  },
};

const show = (value: unknown): string => {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  return typeof value === 'object' ? 'an object' : String(value);
};

/**
 * The shape check of a shared setting: the kind of value only. Its range is the library's rule,
 * applied when the options reach it (worker options below, store and Docket options at open),
 * so serve refuses exactly what `work` and `Docket.open` refuse.
 */
function shapeSchema(setting: CliSetting): z.ZodType {
  switch (setting.kind) {
    case 'integer':
      return z
        .number({ error: (issue) => `must be an integer, got ${show(issue.input)}` })
        .int({ error: (issue) => `must be an integer, got ${show(issue.input)}` });
    case 'list':
      return z.array(z.string({ error: 'entries must be names' }), {
        error: (issue) => `must be a list of names (comma-separated in a flag), got ${show(issue.input)}`,
      });
    case 'boolean':
      return z.boolean({ error: (issue) => `must be true or false, got ${show(issue.input)}` });
    case 'choice':
      return z.enum(setting.choices as [string, ...string[]], {
        error: (issue) => `must be one of ${setting.choices?.join(', ')}, got ${show(issue.input)}`,
      });
    default:
      return z.string({ error: (issue) => `must be text, got ${show(issue.input)}` }).min(1, 'must not be empty');
  }
}

function fromTextOf(kind: CliSetting['kind']): (value: string) => unknown {
  if (kind === 'integer') return integerText;
  if (kind === 'list') return listText;
  if (kind === 'boolean') return booleanText;
  return text;
}

function sharedSetting(setting: CliSetting, group: SettingGroup, overrides: Partial<Setting> = {}): Setting {
  const meaning = SERVE_MEANINGS[setting.key] ?? {};
  return {
    key: setting.key,
    group,
    flag: setting.flag,
    aliases: setting.aliases ?? [],
    env: setting.env,
    kind: setting.kind,
    description: meaning.description ?? setting.description,
    defaultText: meaning.defaultText ?? setting.defaultText,
    fromText: fromTextOf(setting.kind),
    schema: shapeSchema(setting),
    fallback: undefined,
    ...overrides,
  };
}

/** The defaults the worker really applies, read from its resolver so they cannot drift. */
const WORKER_DEFAULTS = resolveWorkerOptions({ id: 'defaults' });

/** Worker settings the server holds itself (with its own default), not in `workerOptions`. */
const SERVER_HELD_WORKER_KEYS = new Set(['concurrency', 'queues', 'leaseMs', 'shutdownGraceMs']);

function workerSetting(setting: CliSetting): Setting {
  switch (setting.key) {
    case 'concurrency':
      return sharedSetting(setting, 'worker', {
        // 0 is the server's own value (no local worker); the worker's range applies to the rest.
        schema: z
          .number({ error: (issue) => `must be an integer (0 runs no local worker), got ${show(issue.input)}` })
          .int({ error: (issue) => `must be an integer (0 runs no local worker), got ${show(issue.input)}` })
          .min(0, { error: 'must be at least 0 (0 runs no local worker)' }),
        fallback: WORKER_DEFAULTS.concurrency,
      });
    case 'leaseMs':
      return sharedSetting(setting, 'worker', { fallback: WORKER_DEFAULTS.leaseMs });
    case 'shutdownGraceMs':
      return sharedSetting(setting, 'worker', { fallback: WORKER_DEFAULTS.shutdownGraceMs });
    default:
      return sharedSetting(setting, 'worker');
  }
}

const SETTINGS: Setting[] = [
  {
    key: DATABASE_SETTING.key,
    group: 'store',
    flag: DATABASE_SETTING.flag,
    aliases: [],
    env: DATABASE_SETTING.env,
    kind: 'string',
    description: DATABASE_SETTING.description,
    defaultText: DATABASE_SETTING.defaultText,
    fromText: text,
    schema: z
      .string()
      .regex(/^(postgres(ql)?:\/\/|sqlite:).+/i, { error: 'must be a store URL: postgres://…, sqlite:file.db' }),
    fallback: 'sqlite:docket.db',
  },
  ...STORE_SETTINGS.map((setting) =>
    // listenUrl is text or false (no LISTEN): a config file may say false as work's does; the
    // store's parser checks the URL and reads "off" from flags and variables.
    setting.key === 'listenUrl'
      ? sharedSetting(setting, 'store', {
          schema: z.union([z.literal(false), z.string().min(1, 'must not be empty')], {
            error: (issue) => `must be a postgres:// URL, or false ("off") for no LISTEN, got ${show(issue.input)}`,
          }),
        })
      : sharedSetting(setting, 'store'),
  ),
  ...DOCKET_SETTINGS.map((setting) => sharedSetting(setting, 'docket')),
  ...WORKER_SETTINGS.map(workerSetting),
  {
    key: 'handlers',
    group: 'worker',
    flag: '--handlers',
    aliases: [],
    env: 'DOCKET_HANDLERS',
    kind: 'string',
    description: 'handlers module whose kinds run on a local handlers worker',
    defaultText: 'none (only built-in kinds run here)',
    fromText: text,
    schema: z.string().min(1, { error: 'must be a file path' }),
    fallback: undefined,
  },
  {
    key: 'logLevel',
    group: 'server',
    flag: '--log-level',
    aliases: [],
    env: 'DOCKET_LOG_LEVEL',
    kind: 'choice',
    description: `level of the JSON log lines on stdout: ${LOG_LEVELS.join(', ')}`,
    defaultText: 'info',
    fromText: text,
    schema: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }),
    fallback: 'info',
  },
  ...Object.entries(SERVE_ONLY_SPECS).map(([key, spec]): Setting => ({ key, group: 'server', aliases: [], ...spec })),
];

/** Every setting of `docket serve`: its flag, environment variable, file key and true default. */
export const SERVER_SETTINGS: readonly ServerSettingInfo[] = SETTINGS.map((s) => ({
  key: s.key,
  group: s.group,
  flag: s.flag,
  env: s.env,
  kind: s.kind,
  description: s.description,
  defaultText: s.defaultText,
  aliases: s.aliases,
}));

function describeSource(source: { kind: 'flag' | 'env' | 'file'; name: string }): string {
  if (source.kind === 'flag') return `from ${source.name}`;
  if (source.kind === 'env') return `from $${source.name}`;
  return `from "${source.name}" in the config file`;
}

/** Inputs of {@link loadServerConfig}. */
export interface LoadServerConfigInput {
  /** Parsed CLI flags keyed by setting name in camelCase (commander's option names), e.g. `{ port: '8080' }`. */
  flags?: Record<string, unknown> | undefined;
  /** The environment (usually `process.env`). */
  env?: Record<string, string | undefined> | undefined;
  /** Path of an optional JSON config file; defaults to `flags.config`, then `$DOCKET_CONFIG`. */
  file?: string | undefined;
}

function readConfigFile(path: string): Record<string, unknown> {
  let raw: string;
  try {
    raw = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigurationError(`config file ${path}: cannot be read (${(error as NodeJS.ErrnoException).code})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new ConfigurationError(`config file ${path}: is not valid JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigurationError(`config file ${path}: must hold a JSON object`);
  }
  const known = new Set(SETTINGS.map((s) => s.key));
  for (const key of Object.keys(parsed)) {
    if (!known.has(key) && WORK_ONLY_SETTINGS[key] === undefined) {
      throw new ConfigurationError(
        `config file ${path}: unknown setting "${key}" (known: ${[...known, ...Object.keys(WORK_ONLY_SETTINGS)].join(', ')})`,
      );
    }
  }
  return parsed as Record<string, unknown>;
}

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1 and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (bare === 'localhost') return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1' || /^::ffff:127\./.test(bare);
  return false;
}

/** The flag value given for a setting, under its own flag or an alias (commander's camelCase names). */
function flagValueOf(setting: Setting, flags: Record<string, unknown>): { flag: string; value: unknown } | undefined {
  if (setting.flag === undefined) return undefined;
  const camel = (flag: string) =>
    flag.replace(/^--/, '').replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
  for (const flag of [setting.flag, ...setting.aliases]) {
    const value = flags[camel(flag)];
    if (value !== undefined) return { flag, value };
  }
  return undefined;
}

/** Resolves and validates the server configuration; throws {@link ConfigurationError} naming the setting. */
export function loadServerConfig(input: LoadServerConfigInput = {}): ServerConfig {
  const flags = input.flags ?? {};
  const env = input.env ?? {};
  const filePath =
    input.file ?? (typeof flags.config === 'string' ? flags.config : undefined) ?? (env.DOCKET_CONFIG || undefined);
  const file = filePath ? readConfigFile(filePath) : {};

  const values: Record<string, unknown> = {};
  const sources = new Map<string, string>();
  for (const setting of SETTINGS) {
    let source: { kind: 'flag' | 'env' | 'file'; name: string } | undefined;
    let value: unknown;
    const flagValue = flagValueOf(setting, flags);
    if (flagValue !== undefined) {
      source = { kind: 'flag', name: flagValue.flag };
      value = typeof flagValue.value === 'string' ? setting.fromText(flagValue.value) : flagValue.value;
    } else if (env[setting.env] !== undefined && env[setting.env] !== '') {
      source = { kind: 'env', name: setting.env };
      value = setting.fromText(env[setting.env] as string);
    } else if (file[setting.key] !== undefined) {
      source = { kind: 'file', name: setting.key };
      value = file[setting.key];
    }
    if (!source) {
      values[setting.key] = setting.fallback;
      continue;
    }
    const parsed = setting.schema.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const path = (issue?.path ?? [])
        .map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`))
        .join('');
      // Token secrets must not end up in an error message that may be logged: show no values.
      const message = issue?.message ?? 'is invalid';
      throw new ConfigurationError(`${setting.key}${path} (${describeSource(source)}): ${message}`);
    }
    values[setting.key] = parsed.data;
    sources.set(setting.key, describeSource(source));
  }

  // Store and Docket options go to Docket.open, the worker options the server does not hold itself
  // to its workers; both only when set, so the library's defaults apply otherwise.
  const top: Record<string, unknown> = {};
  const docketOptions: Record<string, unknown> = {};
  const workerOptions: Record<string, unknown> = {};
  for (const setting of SETTINGS) {
    const value = values[setting.key];
    const passedOn =
      ((setting.group === 'store' || setting.group === 'docket') && !['db', 'schema'].includes(setting.key)) ||
      (setting.group === 'worker' && setting.key !== 'handlers' && !SERVER_HELD_WORKER_KEYS.has(setting.key));
    if (!passedOn) top[setting.key] = value;
    else if (value !== undefined) (setting.group === 'worker' ? workerOptions : docketOptions)[setting.key] = value;
  }
  const result = {
    ...top,
    docketOptions,
    workerOptions,
    sources,
    ignoredSettings: Object.keys(file).filter((key) => WORK_ONLY_SETTINGS[key] !== undefined),
  } as unknown as ServerConfig;

  const names = new Set<string>();
  for (const token of result.tokens) {
    if (names.has(token.name)) {
      throw new ConfigurationError(`tokens: the name "${token.name}" is used twice; token names must be unique`);
    }
    names.add(token.name);
  }
  if (!isLoopbackHost(result.host) && result.tokens.length === 0) {
    const from = sources.get('host');
    throw new ConfigurationError(
      `host${from ? ` (${from})` : ''}: refusing to listen on non-loopback address ${result.host} ` +
        'without authentication; configure tokens ($DOCKET_TOKENS or "tokens" in the config file) or listen on 127.0.0.1',
    );
  }
  checkSchemaAgainstUrl(result);
  if (result.docketOptions.shards !== undefined) {
    // A sharded store has no single URL: the db fallback steps aside, an explicit db is refused.
    if (sources.has('db')) {
      throw new ConfigurationError(
        `db (${sources.get('db')}) and shards (${sources.get('shards')}) both name the store; give one of them`,
      );
    }
    (result as { db: string | undefined }).db = undefined;
  }
  const id = result.workerOptions.id;
  if (typeof id === 'string' && id.length > MAX_WORKER_ID_LENGTH - BUILTIN_ID_SUFFIX.length) {
    throw new ConfigurationError(
      `id (${sources.get('id')}): must be at most ${MAX_WORKER_ID_LENGTH - BUILTIN_ID_SUFFIX.length} characters ` +
        `on a server, whose built-in worker is <id>${BUILTIN_ID_SUFFIX} (a worker id has at most ${MAX_WORKER_ID_LENGTH})`,
    );
  }
  // The worker's own rules, now, so a bad value is refused before the store is opened or a port bound.
  for (const options of localWorkerOptions(result, [])) {
    try {
      resolveWorkerOptions({ ...options, concurrency: Math.max(1, options.concurrency ?? 1) });
    } catch (error) {
      throw attributeSettingError(error, result);
    }
  }
  return result;
}

/** A `?schema=` in a PostgreSQL URL and a different `schema` setting cannot both be meant. */
function checkSchemaAgainstUrl(config: ServerConfig): void {
  if (config.schema === undefined || config.db === undefined || !/^postgres(ql)?:\/\//i.test(config.db)) return;
  let fromUrl: string | null = null;
  try {
    fromUrl = new URL(config.db).searchParams.get('schema');
  } catch {
    return; // the store refuses the URL itself, naming it
  }
  if (fromUrl !== null && fromUrl !== config.schema) {
    throw new ConfigurationError(
      `schema (${config.sources.get('schema')}): names schema "${config.schema}" but the store URL says ?schema=${fromUrl}; give one of them`,
    );
  }
}

/** The built-in worker's id is the configured `id` plus this. */
export const BUILTIN_ID_SUFFIX = '-builtin';
/** The longest worker id the worker accepts (src/worker/worker-options.ts). */
const MAX_WORKER_ID_LENGTH = 200;

/**
 * The options of the local workers, `[builtin, handlers]`: the built-in worker runs webhook jobs on
 * docket.builtin (when webhooks are enabled), the handlers worker the kinds of --handlers (or
 * `kinds`, or every kind with `catchAll`) on `queues`. Every worker setting applies to both, except `queues`,
 * `kinds` and `catchAll` (the handlers worker's only; the built-in worker always serves
 * docket.builtin's webhook kind) and `id` (the built-in worker's is `<id>-builtin`).
 * `userKinds` are the handler kinds other than built-in ones, claimed when `kinds` is unset.
 */
export function localWorkerOptions(config: ServerConfig, userKinds: readonly string[]): [WorkerOptions, WorkerOptions] {
  const { id, kinds, catchAll, ...shared } = config.workerOptions;
  const common: WorkerOptions = {
    ...shared,
    concurrency: config.concurrency,
    leaseMs: config.leaseMs,
    shutdownGraceMs: config.shutdownGraceMs,
  };
  const builtin: WorkerOptions = {
    ...common,
    ...(id === undefined ? {} : { id: `${id}${BUILTIN_ID_SUFFIX}` }),
    queues: [BUILTIN_QUEUE],
    kinds: [WEBHOOK_KIND],
  };
  const handlers: WorkerOptions = {
    ...common,
    ...(id === undefined ? {} : { id }),
    ...(config.queues === undefined ? {} : { queues: config.queues }),
    ...(catchAll === undefined ? {} : { catchAll }),
    ...(kinds !== undefined ? { kinds } : catchAll === true || userKinds.length === 0 ? {} : { kinds: userKinds }),
  };
  return [builtin, handlers];
}

/**
 * Rewrites a library error that names a setting (`worker option leaseMs must be …`,
 * `poolSize must be …`, `retentionMs: …`) as `leaseMs (from --lease-ms): must be …`, so an error
 * from the store, Docket or a worker names where the offending value came from, as the server's
 * own errors do. Other errors are returned unchanged.
 */
export function attributeSettingError(error: unknown, config: Pick<ServerConfig, 'sources'>): unknown {
  if (!(error instanceof ConfigurationError || error instanceof ValidationError)) return error;
  const message = error.message;
  const stripped = message.replace(/^(?:unknown )?(?:worker|Docket) options? /, '');
  const match = /^([A-Za-z]+)((?:\[\d+\])*):? (.*)$/s.exec(stripped);
  const known = new Set(SETTINGS.map((s) => s.key));
  let rewritten: string | undefined;
  if (match?.[1] && known.has(match[1]) && /^(must|\(|names|has|is|cannot)/.test(match[3] ?? '')) {
    const [, key, path, rest] = match;
    const source = config.sources.get(key);
    rewritten = `${key}${path}${source ? ` (${source})` : ''}: ${rest}`;
  } else {
    for (const [key, source] of config.sources) {
      if (new RegExp(`\\b${key}\\b`).test(message)) {
        rewritten = `${key} (${source}): ${message}`;
        break;
      }
    }
  }
  if (rewritten === undefined) return error;
  return new ConfigurationError(rewritten);
}
