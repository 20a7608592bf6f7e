/**
 * Checkouts of Docket a bench script compares: this one, and a baseline (another checkout, with
 * its own node_modules, named by `--baseline DIR` or DOCKET_BASELINE; docs/benchmarks.md,
 * "Before and after a change"). Each is loaded from its own src/, run through tsx like this one.
 */
import { spawnSync } from 'node:child_process';
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

/**
 * Runs a bench script's child for one checkout, `node --import tsx <script> <args…>` in `cwd`
 * (the checkout, so its own node_modules resolve), and returns the JSON the child printed on its
 * last line; a child that fails, or prints no JSON last, throws with its stderr, named `label`.
 */
export function runCheckoutChild<T>(script: string, args: readonly string[], cwd: string, label: string): T {
  const run = spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { cwd, encoding: 'utf8' });
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  if (run.status !== 0 || !line.startsWith('{')) throw new Error(`${label} failed:\n${run.stderr}`);
  return JSON.parse(line) as T;
}

/** Counts handled jobs: `handled()` once per job, `done` once `jobs` have been. */
export function handledCountdown(jobs: number): { handled: () => void; done: Promise<void> } {
  let count = 0;
  let allHandled: () => void = () => {};
  const done = new Promise<void>((resolveDone) => {
    allHandled = resolveDone;
  });
  return {
    handled: () => {
      count += 1;
      if (count === jobs) allHandled();
    },
    done,
  };
}
