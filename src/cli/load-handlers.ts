/**
 * Loads a user's handlers module for `docket work`. The module's default export is either
 *   - an object mapping job kinds to handlers: `export default { 'email.send': async (payload, ctx) => {} }`, or
 *   - a setup function that receives the Docket and registers handlers itself:
 *     `export default (docket) => { docket.handle('email.send', async (payload, ctx) => {}); }`
 *     (it may be async; it is awaited before the worker starts).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Docket } from '../docket.js';
import { failure, usageError } from './cli-error.js';

type AnyHandler = Parameters<Docket['handle']>[1];

/** Imports the module at `path` (relative to the working directory) and registers its handlers; returns the kinds registered by an object export, or null for a setup function. */
export async function loadHandlers(docket: Docket, path: string): Promise<string[] | null> {
  const file = resolve(path);
  if (!existsSync(file)) throw usageError(`--handlers: no such file: ${file}`);
  let loaded: { default?: unknown };
  try {
    loaded = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (error) {
    throw failure(`--handlers: loading ${file} failed: ${(error as Error).stack ?? String(error)}`);
  }
  const exported = loaded.default;
  if (typeof exported === 'function') {
    await (exported as (docket: Docket) => unknown)(docket);
    return null;
  }
  if (typeof exported !== 'object' || exported === null || Array.isArray(exported)) {
    throw usageError(
      `--handlers: ${file} must default-export an object {kind: handler} or a function (docket) => void, got ${exported === null ? 'null' : typeof exported}`,
    );
  }
  const entries = Object.entries(exported as Record<string, unknown>);
  if (entries.length === 0) throw usageError(`--handlers: ${file} exports no handlers`);
  for (const [kind, handler] of entries) {
    if (typeof handler !== 'function') {
      throw usageError(`--handlers: the handler for "${kind}" in ${file} is a ${typeof handler}, not a function`);
    }
    docket.handle(kind, handler as AnyHandler);
  }
  return entries.map(([kind]) => kind);
}
