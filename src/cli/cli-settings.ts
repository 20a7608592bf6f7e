/**
 * Reading settings from flags, the environment and a `--config` file (flag over environment over
 * file), for every command. The setting lists themselves live in src/settings.ts, shared with
 * `docket serve`; this module adds the commander options and the resolution that names where a
 * refused value came from (`(from $DOCKET_MAX_CONCURRENT_CLAIMS)`).
 *
 * Values are passed on as given (text that is a whole number becomes a number): the library
 * validates them, so a value is refused by the same rule, with the same words, on every face.
 */
import { readFileSync } from 'node:fs';
import { Option } from '@commander-js/extra-typings';
import type { CliSetting } from '../settings.js';
import { usageError } from './cli-error.js';

export * from '../settings.js';

/** The `--config <path>` option: a JSON object of settings keyed by option name. */
export function configOption() {
  return new Option(
    '--config <path>',
    'JSON file of settings keyed by option name, e.g. {"leaseMs": 60000} (env $DOCKET_CONFIG)',
  );
}

/** A commander option for `setting`, its default and environment variable in the help text. */
export function optionFor(setting: CliSetting, defaultText: string = setting.defaultText): Option[] {
  const help = `${setting.description} (default: ${defaultText}; env $${setting.env})`;
  const main =
    setting.kind === 'boolean'
      ? new Option(`${setting.flag} [bool]`, help)
      : new Option(`${setting.flag} <${placeholderOf(setting)}>`, help);
  if (setting.kind === 'choice' && setting.choices) main.choices(setting.choices);
  const aliases = (setting.aliases ?? []).map((alias) =>
    new Option(`${alias} <${placeholderOf(setting)}>`, `alias of ${setting.flag}`).hideHelp(),
  );
  return [main, ...aliases];
}

/** The value's name in `--help`: `<ms>`, `<n>`, `<names>`, `<url>`, `<path>` or `<value>`. */
function placeholderOf(setting: CliSetting): string {
  if (setting.key === 'db' || setting.key === 'listenUrl') return 'url';
  if (setting.key === 'handlers') return 'path';
  if (setting.kind === 'list') return 'names';
  if (setting.kind === 'integer') return setting.key.endsWith('Ms') ? 'ms' : 'n';
  return 'value';
}

/** Where a setting's value came from, for error messages. */
export type SettingSource = { from: 'flag' | 'env' | 'file'; name: string };

/** Settings resolved from flags, environment and file. */
export interface ResolvedSettings {
  /** Values keyed by option name, only for settings that were set. */
  values: Record<string, unknown>;
  /** Where each set value came from. */
  sources: Map<string, SettingSource>;
}

/** Describes a source: `--lease-ms`, `$DOCKET_LEASE_MS` or `"leaseMs" in docket.json`. */
export function describeSource(source: SettingSource): string {
  if (source.from === 'flag') return source.name;
  if (source.from === 'env') return `$${source.name}`;
  return source.name;
}

/**
 * Reads a config file: a JSON object whose keys are option names. Keys that `docket serve`
 * knows are accepted too (`allowedExtraKeys`), so one file can configure a server and its workers.
 */
export function readConfigFile(path: string, known: ReadonlySet<string>, allowedExtraKeys: ReadonlySet<string>) {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw usageError(`--config: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw usageError(`--config: ${path} is not valid JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw usageError(`--config: ${path} must hold a JSON object of settings`);
  }
  for (const key of Object.keys(parsed)) {
    if (!known.has(key) && !allowedExtraKeys.has(key)) {
      throw usageError(`--config: unknown setting "${key}" in ${path} (known: ${[...known].join(', ')})`);
    }
  }
  return parsed as Record<string, unknown>;
}

/** Inputs of {@link resolveSettings}. */
export interface ResolveSettingsInput {
  settings: readonly CliSetting[];
  /** Commander's parsed options (camelCase keys, raw text values). */
  flags: Record<string, unknown>;
  env: NodeJS.ProcessEnv;
  /** Keys another command's config file may hold (serve's), accepted and ignored. */
  extraFileKeys?: ReadonlySet<string> | undefined;
}

/** Resolves every setting: flag, else environment, else config file; unset ones are left out. */
export function resolveSettings(input: ResolveSettingsInput): ResolvedSettings {
  const { settings, flags, env } = input;
  const configPath = (typeof flags.config === 'string' ? flags.config : undefined) ?? nonEmpty(env.DOCKET_CONFIG);
  const file = configPath
    ? readConfigFile(configPath, new Set(settings.map((s) => s.key)), input.extraFileKeys ?? new Set())
    : {};
  const values: Record<string, unknown> = {};
  const sources = new Map<string, SettingSource>();
  for (const setting of settings) {
    const flagValue = flagValueOf(setting, flags);
    const envValue = nonEmpty(env[setting.env]);
    let source: SettingSource;
    let value: unknown;
    if (flagValue !== undefined) {
      source = { from: 'flag', name: flagValue.flag };
      value = fromText(setting, flagValue.value, source);
    } else if (envValue !== undefined) {
      source = { from: 'env', name: setting.env };
      value = fromText(setting, envValue, source);
    } else if (file[setting.key] !== undefined) {
      source = { from: 'file', name: `"${setting.key}" in ${configPath}` };
      value = file[setting.key];
      if (setting.kind === 'choice') checkChoice(setting, value, source);
    } else continue;
    values[setting.key] = value;
    sources.set(setting.key, source);
  }
  return { values, sources };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** The flag value given for a setting, under its own flag or an alias. */
function flagValueOf(
  setting: CliSetting,
  flags: Record<string, unknown>,
): { flag: string; value: unknown } | undefined {
  for (const flag of [setting.flag, ...(setting.aliases ?? [])]) {
    const value = flags[camelOf(flag)];
    if (value !== undefined) return { flag, value };
  }
  return undefined;
}

/** Commander's property name for a flag: `--lease-ms` → `leaseMs`. */
function camelOf(flag: string): string {
  return flag.replace(/^--/, '').replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

/** Turns flag or environment text into the value the library validates. */
function fromText(setting: CliSetting, value: unknown, source: SettingSource): unknown {
  if (typeof value !== 'string') return value;
  switch (setting.kind) {
    case 'integer':
      // Whole numbers become numbers; anything else goes on as text, for the library to refuse by its own rule.
      return /^[+-]?\d+$/.test(value.trim()) ? Number(value.trim()) : value;
    case 'list':
      return value
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== '');
    case 'boolean': {
      const lowered = value.trim().toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(lowered)) return true;
      if (['false', '0', 'no', 'off'].includes(lowered)) return false;
      throw usageError(`${describeSource(source)}: must be true or false, got ${JSON.stringify(value)}`);
    }
    case 'choice':
      checkChoice(setting, value, source);
      return value;
    default:
      return value;
  }
}

function checkChoice(setting: CliSetting, value: unknown, source: SettingSource): void {
  if (!setting.choices?.includes(value as string)) {
    throw usageError(
      `${describeSource(source)}: must be one of ${setting.choices?.join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
}

/**
 * Appends where the offending setting came from to a library error that names it by option name,
 * e.g. "worker option leaseMs must be …" + " (from --lease-ms)".
 */
export function withSettingSource(message: string, sources: ReadonlyMap<string, SettingSource>): string {
  // The option named first is the refused one: a later name may be part of the quoted value
  // ("listenUrl must be …, got "postgres://db/x"" names listenUrl, not db).
  let first: { at: number; source: SettingSource } | undefined;
  for (const [key, source] of sources) {
    const at = message.search(new RegExp(`\\b${key}\\b`));
    if (at >= 0 && (first === undefined || at < first.at)) first = { at, source };
  }
  return first ? `${message} (from ${describeSource(first.source)})` : message;
}
