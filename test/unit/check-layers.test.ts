/**
 * The layering check itself: it must refuse the imports docs/architecture.md forbids (a store
 * implementation from the worker, the faces or docket.ts) and accept the real tree.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { areaOf, checkImports, readSources } from '../../scripts/check-layers.js';

const REPO = resolve(import.meta.dirname, '../..');

describe('areaOf', () => {
  it('splits the store folder into contract, implementations and the URL factory', () => {
    expect(areaOf('store/store.ts')).toBe('store-contract');
    expect(areaOf('store/schedule-plan.ts')).toBe('store-contract');
    expect(areaOf('store/open-store.ts')).toBe('store-factory');
    expect(areaOf('store/open-store.js')).toBe('store-factory');
    expect(areaOf('store/postgres/postgres-store.ts')).toBe('store-impl');
    expect(areaOf('store/sqlite/job-queries.ts')).toBe('store-impl');
    expect(areaOf('docket.ts')).toBe('root');
    expect(areaOf('worker/worker.ts')).toBe('worker');
  });
});

describe('checkImports', () => {
  it('accepts the real source tree', () => {
    expect(checkImports(readSources(join(REPO, 'src')))).toEqual([]);
  });

  it('refuses a store implementation imported from the worker, named with both areas', () => {
    const problems = checkImports([
      {
        path: 'worker/worker.ts',
        text: "import { PostgresStore } from '../store/postgres/postgres-store.js';\nimport type { Store } from '../store/store.js';\n",
      },
    ]);
    expect(problems).toEqual([
      'src/worker/worker.ts (worker) may not import ../store/postgres/postgres-store.js (store-impl)',
    ]);
  });

  it('refuses an implementation from docket.ts, http and cli (static, re-exported or dynamic), but not the factory', () => {
    const problems = checkImports([
      { path: 'docket.ts', text: "import { SqliteStore } from './store/sqlite/sqlite-store.js';" },
      { path: 'docket.ts', text: "import { openStore } from './store/open-store.js';" },
      { path: 'http/server.ts', text: "export { PostgresStore } from '../store/postgres/postgres-store.js';" },
      { path: 'cli/run-cli.ts', text: "const m = await import('../store/sqlite/migrations.js');" },
    ]);
    expect(problems).toEqual([
      'src/docket.ts (root) may not import ./store/sqlite/sqlite-store.js (store-impl)',
      'src/http/server.ts (http) may not import ../store/postgres/postgres-store.js (store-impl)',
      'src/cli/run-cli.ts (cli) may not import ../store/sqlite/migrations.js (store-impl)',
    ]);
  });

  it('refuses the worker opening stores by URL, and the contract reaching into an implementation', () => {
    expect(
      checkImports([
        { path: 'worker/worker.ts', text: "import { openStore } from '../store/open-store.js';" },
        { path: 'store/store.ts', text: "import type { PostgresStore } from './postgres/postgres-store.js';" },
      ]),
    ).toEqual([
      'src/worker/worker.ts (worker) may not import ../store/open-store.js (store-factory)',
      'src/store/store.ts (store-contract) may not import ./postgres/postgres-store.js (store-impl)',
    ]);
  });

  it('lets an implementation import the contract and its shared modules', () => {
    expect(
      checkImports([
        {
          path: 'store/sqlite/sqlite-store.ts',
          text: "import type { Store } from '../store.js';\nimport { x } from '../schedule-plan.js';",
        },
      ]),
    ).toEqual([]);
  });
});

describe('npm run layers', () => {
  it('exits non-zero on a tree whose worker imports a store implementation', () => {
    const root = mkdtempSync(join(tmpdir(), 'docket-layers-'));
    try {
      cpSync(join(REPO, 'src'), join(root, 'src'), { recursive: true });
      mkdirSync(join(root, 'src/worker'), { recursive: true });
      writeFileSync(
        join(root, 'src/worker/bad-import.ts'),
        "import { SqliteStore } from '../store/sqlite/sqlite-store.js';\nexport const bad = SqliteStore;\n",
      );
      const run = () =>
        execFileSync(join(REPO, 'node_modules/.bin/tsx'), [join(REPO, 'scripts/check-layers.ts')], {
          cwd: root,
          encoding: 'utf8',
          stdio: 'pipe',
        });
      let stderr = '';
      let status = 0;
      try {
        run();
      } catch (error) {
        const failure = error as { status: number; stderr: string };
        status = failure.status;
        stderr = failure.stderr;
      }
      expect(status).toBe(1);
      expect(stderr).toContain(
        'src/worker/bad-import.ts (worker) may not import ../store/sqlite/sqlite-store.js (store-impl)',
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
