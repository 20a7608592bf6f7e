#!/usr/bin/env node
/**
 * The `docket` executable. A built package runs dist/cli/main.js; a fresh clone (no dist/, no build
 * step) runs src/cli/main.ts through tsx's loader, so `npx docket …` works right after `npm ci`.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const built = new URL('../dist/cli/main.js', import.meta.url);
if (existsSync(fileURLToPath(built))) {
  await import(built.href);
} else {
  // Both of tsx's hooks, as src/cli/load-handlers.ts registers them for a built package: a
  // `--handlers ./handlers.ts` in a project without "type": "module" is CommonJS to tsx, and the
  // ESM hooks alone would hand it to Node's require(esm), which refuses it as a cycle.
  const cjs = await import('tsx/cjs/api');
  cjs.register();
  const esm = await import('tsx/esm/api');
  esm.register();
  await import(new URL('../src/cli/main.ts', import.meta.url).href);
}
