/**
 * Enforces the layering in docs/architecture.md: a wrong import fails `npm run check` instead of
 * waiting for a review. Reads every relative import under src/ and checks it against the rules.
 *
 * Areas: a file's first folder under src/, with three splits that matter for the store seam:
 * - `store-contract`: src/store/*.ts, the Store contract and the pure modules both stores share;
 * - `store-impl`: src/store/postgres/** and src/store/sqlite/**, the implementations;
 * - `store-factory`: src/store/open-store.ts, the one place that opens a store by URL.
 * The worker, the faces (http, cli) and the root may import the contract, never an
 * implementation; the root (docket.ts) reaches a concrete store only through the factory.
 *
 * `checkImports` is pure (files in, problems out) so a test can feed it a bad import.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Which areas each area may import (its own area is always allowed). */
export const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  job: [],
  retry: ['job'],
  clock: ['job'],
  schedule: ['job', 'retry', 'clock'],
  'store-contract': ['job', 'retry', 'clock', 'schedule'],
  // An implementation applies decisions: the contract, its shared pure modules and pure policy.
  'store-impl': ['job', 'retry', 'clock', 'schedule', 'store-contract', 'store-factory'],
  // The factory opens an implementation by URL (lazily, with import()).
  'store-factory': ['job', 'retry', 'clock', 'schedule', 'store-contract', 'store-impl'],
  // Routing policy (which kinds a worker claims, which due jobs nobody serves): pure, like retry/.
  routing: ['job', 'store-contract'],
  worker: ['job', 'retry', 'clock', 'schedule', 'store-contract', 'routing'],
  // The submit path (group commit, retry on a lost connection): policy plus the Store contract, like the worker.
  submit: ['job', 'retry', 'clock', 'store-contract'],
  // The dashboard's server side: static pages and modules, no Docket operation (the page uses the API).
  dashboard: [],
  http: [
    'dashboard',
    'job',
    'retry',
    'clock',
    'schedule',
    'store-contract',
    'store-factory',
    'worker',
    'routing',
    'root',
  ],
  cli: [
    'dashboard',
    'job',
    'retry',
    'clock',
    'schedule',
    'store-contract',
    'store-factory',
    'worker',
    'http',
    'routing',
    'root',
  ],
  root: [
    'job',
    'retry',
    'clock',
    'schedule',
    'store-contract',
    'store-factory',
    'worker',
    'http',
    'cli',
    'routing',
    'submit',
  ],
};

/** The area of a path relative to src/ (forward slashes), e.g. `worker/worker.ts` → `worker`. */
export function areaOf(pathInSrc: string): string {
  const parts = pathInSrc.split('/');
  if (parts.length === 1) return 'root';
  if (parts[0] === 'store') {
    if (parts.length === 2) return /^open-store\.[jt]s$/.test(parts[1] ?? '') ? 'store-factory' : 'store-contract';
    return 'store-impl';
  }
  return parts[0] ?? 'root';
}

/** One source file: its path relative to src/ (forward slashes) and its text. */
export interface SourceFile {
  path: string;
  text: string;
}

const IMPORT = /(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/** Every relative import of `files` that breaks {@link ALLOWED}, as one line each. */
export function checkImports(files: readonly SourceFile[]): string[] {
  const problems: string[] = [];
  for (const file of files) {
    const from = areaOf(file.path);
    for (const match of file.text.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2];
      if (!spec) continue;
      // Resolve against a virtual root so the check needs no file system.
      const target = relative('/src', resolve('/src', dirname(file.path), spec))
        .split('\\')
        .join('/');
      if (target.startsWith('..')) {
        problems.push(`src/${file.path} imports ${spec}, outside src/`);
        continue;
      }
      const to = areaOf(target);
      if (to === from) continue;
      if (!(ALLOWED[from] ?? []).includes(to)) {
        problems.push(`src/${file.path} (${from}) may not import ${spec} (${to})`);
      }
    }
  }
  return problems;
}

/** Every .ts file under `srcDir` (tests excluded), as {@link SourceFile}s. */
export function readSources(srcDir: string): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts') && !path.endsWith('.test.ts')) {
        files.push({ path: relative(srcDir, path).split('\\').join('/'), text: readFileSync(path, 'utf8') });
      }
    }
  };
  walk(srcDir);
  return files;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = checkImports(readSources(resolve('src')));
  if (problems.length > 0) {
    console.error(`Layering violations (see docs/architecture.md):\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  console.log('layers: ok');
}
