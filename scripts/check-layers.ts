/**
 * Enforces the layering in docs/architecture.md: a wrong import fails `npm run check` instead of
 * waiting for a review. Reads every relative import under src/ and checks it against the rules.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const SRC = resolve('src');

/** Which top-level areas each area may import (its own area is always allowed). */
const ALLOWED: Record<string, string[]> = {
  job: [],
  retry: ['job'],
  clock: ['job'],
  schedule: ['job', 'retry', 'clock'],
  store: ['job', 'retry', 'clock', 'schedule'],
  'store-contract': ['job', 'retry', 'clock', 'schedule', 'store'],
  worker: ['job', 'retry', 'clock', 'schedule', 'store-contract'],
  http: ['job', 'retry', 'clock', 'schedule', 'store-contract', 'worker', 'root'],
  cli: ['job', 'retry', 'clock', 'schedule', 'store-contract', 'worker', 'http', 'root'],
  root: ['job', 'retry', 'clock', 'schedule', 'store', 'store-contract', 'worker', 'http', 'cli'],
};

/** The area of a file under src/: its first folder, `store-contract` for src/store/*.ts, `root` for src/*.ts. */
function areaOf(file: string): string {
  const parts = relative(SRC, file).split('/');
  if (parts.length === 1) return 'root';
  if (parts[0] === 'store' && parts.length === 2) return 'store-contract';
  return parts[0] ?? 'root';
}

function* walk(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* walk(path);
    else if (path.endsWith('.ts') && !path.endsWith('.test.ts')) yield path;
  }
}

const problems: string[] = [];
for (const file of walk(SRC)) {
  const from = areaOf(file);
  const text = readFileSync(file, 'utf8');
  for (const match of text.matchAll(
    /(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g,
  )) {
    const spec = match[1] ?? match[2];
    if (!spec) continue;
    const target = resolve(dirname(file), spec);
    if (!target.startsWith(SRC)) {
      problems.push(`${relative('.', file)} imports ${spec}, outside src/`);
      continue;
    }
    const to = areaOf(target);
    const sameArea =
      to === from || (from === 'store' && to === 'store-contract') || (from === 'store-contract' && to === 'store');
    if (sameArea) continue;
    if (!(ALLOWED[from] ?? []).includes(to)) {
      problems.push(`${relative('.', file)} (${from}) may not import ${spec} (${to})`);
    }
  }
}
if (problems.length > 0) {
  console.error(`Layering violations (see docs/architecture.md):\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log('layers: ok');
