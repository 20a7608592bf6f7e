/**
 * Loads a user's handlers module for `docket work`. The module's default export is either
 *   - an object mapping job kinds to handlers: `export default { 'email.send': async (payload, ctx) => {} }`, or
 *   - a setup function that receives the Docket and registers handlers itself:
 *     `export default (docket) => { docket.handle('email.send', async (payload, ctx) => {}); }`
 *     (it may be async; it is awaited before the worker starts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Docket } from '../docket.js';
import { failure, usageError } from './cli-error.js';

type AnyHandler = Parameters<Docket['handle']>[1];

/** Imports the module at `path` (relative to the working directory) and registers its handlers; returns the kinds registered by an object export, or null for a setup function. */
export async function loadHandlers(docket: Docket, path: string): Promise<string[] | null> {
  const file = resolve(path);
  if (!existsSync(file)) throw usageError(`--handlers: no such file: ${file}`);
  if (TYPESCRIPT_EXTENSIONS.has(extname(file))) await registerTypeScriptLoader(file);
  let loaded: { default?: unknown };
  try {
    loaded = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (TYPESCRIPT_EXTENSIONS.has(extname(file)) && typeof code === 'string' && UNLOADABLE_TYPESCRIPT_CODES.has(code)) {
      throw usageError(
        `--handlers: ${file} is TypeScript, which Node ${process.version} cannot load on its own here: ` +
          'install tsx next to it ("npm install --save-dev tsx") or compile it and pass the .js file',
      );
    }
    throw failure(`--handlers: loading ${file} failed: ${(error as Error).stack ?? String(error)}`);
  }
  let exported = loaded.default;
  // A module compiled to CommonJS (a .ts file in a project without "type": "module") arrives as
  // module.exports = { __esModule: true, default: … }; its default export is one level down.
  if (isTranspiledCommonJs(exported)) exported = exported.default;
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

/** True for the exports object of an ES module compiled to CommonJS (TypeScript, esbuild, Babel). */
function isTranspiledCommonJs(value: unknown): value is { default: unknown } {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { __esModule?: unknown }).__esModule === true &&
    'default' in value
  );
}

/** Extensions a TypeScript handlers module may have. */
const TYPESCRIPT_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.tsx']);

/** Node's codes for "this is TypeScript and nothing here can load it". */
const UNLOADABLE_TYPESCRIPT_CODES = new Set([
  'ERR_UNKNOWN_FILE_EXTENSION',
  'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX',
  'ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING',
]);

let typeScriptLoaderRegistered = false;

/** What Docket uses of tsx's APIs (`tsx/esm/api`, `tsx/cjs/api`). */
interface TsxApi {
  register?: () => unknown;
}

/**
 * Makes `import()` of a .ts handlers module work from the built package: registers tsx's ESM
 * loader when tsx can be found, beside Docket first, then in the handlers file's own project.
 * From a source checkout this module is itself TypeScript, so a loader is already active. Without
 * tsx nothing is registered: Node 22.18+ may still strip simple types itself, and when it cannot,
 * the import fails with a code that {@link loadHandlers} turns into a one-line "how to fix it".
 */
async function registerTypeScriptLoader(handlersFile: string): Promise<void> {
  if (typeScriptLoaderRegistered || import.meta.url.endsWith('.ts')) return;
  // Both hooks: in a project without "type": "module" a .ts file is CommonJS to tsx, and the ESM
  // hooks alone would hand it to Node's require(esm), which refuses it as a cycle.
  const esm = await importTsxApi(handlersFile, './esm/api');
  const cjs = await importTsxApi(handlersFile, './cjs/api');
  if (typeof esm?.register !== 'function') return;
  if (typeof cjs?.register === 'function') cjs.register();
  esm.register();
  typeScriptLoaderRegistered = true;
}

/**
 * One of tsx's APIs, or undefined when tsx is not installed. It must be the ESM build: the CommonJS
 * build of `tsx/esm/api` registers its hooks from a wrong path. `createRequire` resolves with
 * `require` conditions, so the handlers project's copy is found through its package.json exports.
 */
async function importTsxApi(handlersFile: string, subpath: './esm/api' | './cjs/api'): Promise<TsxApi | undefined> {
  try {
    return (await import(`tsx${subpath.slice(1)}`)) as TsxApi;
  } catch {
    // Not beside Docket; look in the handlers file's project.
  }
  let manifestPath: string;
  try {
    manifestPath = createRequire(handlersFile).resolve('tsx/package.json');
  } catch {
    return undefined;
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { exports?: Record<string, unknown> };
  const entry = esmDefault(manifest.exports?.[subpath]);
  if (entry === undefined) return undefined;
  return (await import(pathToFileURL(join(dirname(manifestPath), entry)).href)) as TsxApi;
}

/** The file an exports entry names for `import`: `{ import: { default: './x.mjs' } }` or `{ import: './x.mjs' }`. */
function esmDefault(entry: unknown): string | undefined {
  const target = (entry as { import?: unknown } | undefined)?.import;
  if (typeof target === 'string') return target;
  const fallback = (target as { default?: unknown } | undefined)?.default;
  return typeof fallback === 'string' ? fallback : undefined;
}
