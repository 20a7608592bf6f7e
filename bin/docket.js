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
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/cli/main.ts', import.meta.url).href);
}
