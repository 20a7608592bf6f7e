/**
 * `docket serve` configuration: each setting comes from a flag, else an environment variable,
 * else the optional JSON config file, else its default, and is validated before anything starts.
 * Errors name the setting and where its value came from, e.g.
 *   port (from --port): must be an integer from 0 to 65535, got "80a"
 * Secrets (tokens, the webhook signing secret) have no flag on purpose: flags show up in `ps`
 * and shell history; they come from the environment or the file.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';
import { ConfigurationError } from '../job/errors.js';
import { type ApiToken, SCOPES } from './auth.js';
import { DestinationGuard } from './ssrf-guard.js';

/** Log levels accepted by `logLevel`. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** The validated configuration of a Docket server. */
export interface ServerConfig {
  /** Store URL: `sqlite:path.db`, `sqlite::memory:` or `postgres://…`. */
  db: string;
  /** PostgreSQL schema; undefined for the store's default. */
  schema: string | undefined;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Bearer tokens; empty means no authentication (allowed on loopback only). */
  tokens: ApiToken[];
  /** Local worker concurrency; 0 runs no worker in this process. */
  concurrency: number;
  /** Queues the local worker serves; undefined for all. */
  queues: string[] | undefined;
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
}

type Source = { kind: 'flag' | 'env' | 'file'; name: string };

interface Setting {
  key: keyof ServerConfig;
  flag?: string;
  env: string;
  /** Converts a text value (flag or environment) into the JSON-like value the schema checks. */
  fromText: (text: string) => unknown;
  schema: z.ZodType;
  fallback: unknown;
}

/** One line per setting for `docket serve --help`. */
const DESCRIPTIONS: Record<string, string> = {
  db: 'store URL: postgres://… or sqlite:file.db (default sqlite:docket.db)',
  schema: "PostgreSQL schema holding Docket's tables (default docket)",
  host: 'address to listen on; anything but loopback needs tokens (default 127.0.0.1)',
  port: 'port to listen on (default 8080; 0 picks a free one)',
  tokens: 'bearer tokens "name:scope+scope:secret ..." (environment or file only)',
  concurrency: "handlers run by the server's own workers; 0 runs none",
  queues: "queues the server's workers claim from, comma-separated (default all)",
  leaseMs: "lease length of the server's workers, ms",
  bodyLimitBytes: 'largest request body accepted, bytes (default 1 MiB)',
  maxLongPollMs: "longest wait a remote worker's claim may ask for, ms",
  logLevel: 'log level: trace, debug, info, warn, error, fatal, silent',
  webhookSecret: 'HMAC secret that signs webhook deliveries (environment or file only)',
  webhookAllowHosts: 'hosts webhooks may call: exact, *.domain or *, comma-separated',
  webhookAllowAddresses: 'private or loopback CIDRs webhooks may nevertheless call, comma-separated',
  webhookTimeoutMs: 'per-request timeout of a webhook delivery, ms (default 10 s)',
  webhookRetryAfterCapMs: 'longest Retry-After honoured on 429/503, ms (default 1 h)',
};

const text = (value: string): unknown => value;
const integerText = (value: string): unknown => (/^-?\d+$/.test(value.trim()) ? Number(value.trim()) : value);
const listText = (value: string): unknown =>
  value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');

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

const SETTINGS: Setting[] = [
  {
    key: 'db',
    flag: '--db',
    env: 'DOCKET_DATABASE_URL',
    fromText: text,
    schema: z
      .string()
      .regex(/^(postgres(ql)?:\/\/|sqlite:).+/i, { error: 'must be a store URL: postgres://…, sqlite:file.db' }),
    fallback: 'sqlite:docket.db',
  },
  {
    key: 'schema',
    flag: '--schema',
    env: 'DOCKET_SCHEMA',
    fromText: text,
    schema: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, { error: 'must be a lower-case SQL identifier' }),
    fallback: undefined,
  },
  {
    key: 'host',
    flag: '--host',
    env: 'DOCKET_HOST',
    fromText: text,
    schema: z.string().min(1, { error: 'must not be empty' }),
    fallback: '127.0.0.1',
  },
  {
    key: 'port',
    flag: '--port',
    env: 'DOCKET_PORT',
    fromText: integerText,
    schema: z
      .number({ error: (issue) => `must be an integer from 0 to 65535, got ${show(issue.input)}` })
      .int({ error: (issue) => `must be an integer from 0 to 65535, got ${show(issue.input)}` })
      .min(0, { error: (issue) => `must be an integer from 0 to 65535, got ${show(issue.input)}` })
      .max(65535, { error: (issue) => `must be an integer from 0 to 65535, got ${show(issue.input)}` }),
    fallback: 8080,
  },
  {
    key: 'tokens',
    env: 'DOCKET_TOKENS',
    fromText: parseTokensText,
    schema: z.array(tokenSchema, {
      error: 'must be a list of {name, token, scopes}, or "name:scope+scope:secret" entries',
    }),
    fallback: [],
  },
  {
    key: 'concurrency',
    flag: '--concurrency',
    env: 'DOCKET_CONCURRENCY',
    fromText: integerText,
    schema: z
      .number({ error: (issue) => `must be an integer from 0 to 1000, got ${show(issue.input)}` })
      .int({ error: 'must be an integer' })
      .min(0)
      .max(1000),
    fallback: 10,
  },
  {
    key: 'queues',
    flag: '--queues',
    env: 'DOCKET_QUEUES',
    fromText: listText,
    schema: z
      .array(z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, { error: 'queue names are 1-64 letters, digits, _ . : -' }))
      .min(1, { error: 'must name at least one queue' }),
    fallback: undefined,
  },
  {
    key: 'leaseMs',
    flag: '--lease-ms',
    env: 'DOCKET_LEASE_MS',
    fromText: integerText,
    schema: msSchema(1000, 3_600_000),
    fallback: 30_000,
  },
  {
    key: 'bodyLimitBytes',
    flag: '--body-limit-bytes',
    env: 'DOCKET_BODY_LIMIT_BYTES',
    fromText: integerText,
    schema: z
      .number({ error: (issue) => `must be an integer number of bytes, got ${show(issue.input)}` })
      .int()
      .min(1024, { error: 'must be at least 1024' })
      .max(64 * 1024 * 1024, { error: 'must be at most 67108864 (64 MiB)' }),
    fallback: 1024 * 1024,
  },
  {
    key: 'maxLongPollMs',
    flag: '--max-long-poll-ms',
    env: 'DOCKET_MAX_LONG_POLL_MS',
    fromText: integerText,
    schema: msSchema(0, 300_000),
    fallback: 30_000,
  },
  {
    key: 'logLevel',
    flag: '--log-level',
    env: 'DOCKET_LOG_LEVEL',
    fromText: text,
    schema: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }),
    fallback: 'info',
  },
  {
    key: 'webhookSecret',
    env: 'DOCKET_WEBHOOK_SECRET',
    fromText: text,
    schema: z.string().min(16, { error: 'must be at least 16 characters (use a random secret)' }),
    fallback: undefined,
  },
  {
    key: 'webhookAllowHosts',
    flag: '--webhook-allow-hosts',
    env: 'DOCKET_WEBHOOK_ALLOW_HOSTS',
    fromText: listText,
    schema: z.array(
      z.string().regex(/^(\*|(\*\.)?[A-Za-z0-9.:[\]-]+)$/, {
        error: 'entries are host names, *.domain or * (any public host)',
      }),
    ),
    fallback: [],
  },
  {
    key: 'webhookAllowAddresses',
    flag: '--webhook-allow-addresses',
    env: 'DOCKET_WEBHOOK_ALLOW_ADDRESSES',
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
  {
    key: 'webhookTimeoutMs',
    flag: '--webhook-timeout-ms',
    env: 'DOCKET_WEBHOOK_TIMEOUT_MS',
    fromText: integerText,
    schema: msSchema(100, 300_000),
    fallback: 10_000,
  },
  {
    key: 'webhookRetryAfterCapMs',
    flag: '--webhook-retry-after-cap-ms',
    env: 'DOCKET_WEBHOOK_RETRY_AFTER_CAP_MS',
    fromText: integerText,
    schema: msSchema(0, 7 * 24 * 3_600_000),
    fallback: 3_600_000,
  },
];

/** The flag, environment variable and file key of every setting, for documentation and the CLI. */
export const SERVER_SETTINGS: readonly { key: string; flag: string | undefined; env: string; description: string }[] =
  SETTINGS.map((s) => ({
    key: s.key,
    flag: s.flag,
    env: s.env,
    description: DESCRIPTIONS[s.key] ?? s.key,
  }));

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  return typeof value === 'object' ? 'an object' : String(value);
}

function describeSource(source: Source): string {
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
  const known = new Set(SETTINGS.map((s) => s.key as string));
  for (const key of Object.keys(parsed)) {
    if (!known.has(key)) {
      throw new ConfigurationError(`config file ${path}: unknown setting "${key}" (known: ${[...known].join(', ')})`);
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

/** Resolves and validates the server configuration; throws {@link ConfigurationError} naming the setting. */
export function loadServerConfig(input: LoadServerConfigInput = {}): ServerConfig {
  const flags = input.flags ?? {};
  const env = input.env ?? {};
  const filePath =
    input.file ?? (typeof flags.config === 'string' ? flags.config : undefined) ?? (env.DOCKET_CONFIG || undefined);
  const file = filePath ? readConfigFile(filePath) : {};

  const config: Record<string, unknown> = {};
  const sources = new Map<string, Source>();
  for (const setting of SETTINGS) {
    const flagName = setting.key as string;
    let source: Source | undefined;
    let value: unknown;
    const flagValue = setting.flag ? flags[flagName] : undefined;
    if (flagValue !== undefined && setting.flag) {
      source = { kind: 'flag', name: setting.flag };
      value = typeof flagValue === 'string' ? setting.fromText(flagValue) : flagValue;
    } else if (env[setting.env] !== undefined && env[setting.env] !== '') {
      source = { kind: 'env', name: setting.env };
      value = setting.fromText(env[setting.env] as string);
    } else if (file[flagName] !== undefined) {
      source = { kind: 'file', name: flagName };
      value = file[flagName];
    }
    if (!source) {
      config[setting.key] = setting.fallback;
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
    config[setting.key] = parsed.data;
    sources.set(setting.key, source);
  }

  const result = config as unknown as ServerConfig;
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
      `host${from ? ` (${describeSource(from)})` : ''}: refusing to listen on non-loopback address ${result.host} ` +
        'without authentication; configure tokens ($DOCKET_TOKENS or "tokens" in the config file) or listen on 127.0.0.1',
    );
  }
  return result;
}
