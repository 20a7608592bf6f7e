/**
 * Where the CLI's Docket comes from: `--db`, else DOCKET_DATABASE_URL, else `sqlite:docket.db`.
 * Every command opens one Docket, does its work through Docket's admin operations (never SQL) and
 * closes it, so a command leaves no connection or lock behind.
 */
import { Option } from '@commander-js/extra-typings';
import { Docket } from '../docket.js';
import type { CliLogger } from './cli-logger.js';

/** The store URL used when neither `--db` nor DOCKET_DATABASE_URL is given. */
export const DEFAULT_DATABASE_URL = 'sqlite:docket.db';

/** The `--db <url>` option every database command takes. */
export function databaseOption() {
  return new Option(
    '--db <url>',
    `store URL: postgres://user@host:5432/db[?schema=name], sqlite:path/to/file.db (default: $DOCKET_DATABASE_URL, else ${DEFAULT_DATABASE_URL})`,
  );
}

/** The `--json` option: machine-readable output on stdout. */
export function jsonOption() {
  return new Option('--json', 'print JSON instead of a table');
}

/** The URL a command should open. */
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

/** Opens Docket on the URL a command was given. */
export async function openCliDocket(flag: string | undefined, logger?: CliLogger): Promise<Docket> {
  const url = resolveDatabaseUrl(flag);
  const schema = schemaFromUrl(url);
  return Docket.open({ url, ...(schema ? { schema } : {}), ...(logger ? { logger } : {}) });
}

/** Runs `body` with an open Docket and always closes it, even when `body` throws. */
export async function withDocket<T>(flag: string | undefined, body: (docket: Docket) => Promise<T>): Promise<T> {
  const docket = await openCliDocket(flag);
  try {
    return await body(docket);
  } finally {
    await docket.close();
  }
}
