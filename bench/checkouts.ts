/**
 * Checkouts of Docket a bench script compares: this one, and a baseline (another checkout, with
 * its own node_modules, named by `--baseline DIR` or DOCKET_BASELINE; docs/benchmarks.md,
 * "Before and after a change"). Each is loaded from its own src/, run through tsx like this one.
 */
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Docket } from '../src/docket.js';

/** The root of this checkout. */
export const THIS_CHECKOUT = resolve(fileURLToPath(new URL('..', import.meta.url)));

/** The Docket class of the checkout at `dir` (this one's when `dir` is {@link THIS_CHECKOUT}). */
export async function importDocket(dir: string): Promise<typeof Docket> {
  const module = (await import(pathToFileURL(join(resolve(dir), 'src/docket.ts')).href)) as { Docket: typeof Docket };
  return module.Docket;
}
