/**
 * better-sqlite3 is an optional dependency: a PostgreSQL-only install may omit it. These tests run
 * real child processes in which the package cannot be resolved (see fixtures/hide-better-sqlite3.mjs)
 * and check that PostgreSQL still opens, that a SQLite URL is refused with an error naming the
 * package and how to install it, and that the CLI says so in one line and writes nothing.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/stores.js';

const REPO_ROOT = resolve(import.meta.dirname, '../..');
const HIDE = resolve(import.meta.dirname, 'fixtures/hide-better-sqlite3.mjs');
const OPEN_STORES = resolve(import.meta.dirname, 'fixtures/open-stores.ts');

let postgres: TestDatabase;
let dir: string;

beforeAll(async () => {
  postgres = await createTestDatabase('postgres');
  dir = mkdtempSync(join(tmpdir(), 'docket-optional-sqlite-'));
});

afterAll(async () => {
  await postgres?.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `node [--import hide] …args` and returns its status and output. */
function runNode(hideSqlite: boolean, args: string[]) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', ...(hideSqlite ? ['--import', HIDE] : []), ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, DOCKET_DATABASE_URL: '' },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function openBoth(hideSqlite: boolean, sqliteFile: string) {
  const result = runNode(hideSqlite, [OPEN_STORES, `sqlite:${sqliteFile}`, postgres.url, postgres.schema ?? '']);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
}

describe('better-sqlite3 as an optional dependency', () => {
  it('opens both stores when better-sqlite3 is installed (the control for the cases below)', () => {
    expect(openBoth(false, join(dir, 'control.db'))).toEqual({ sqlite: 'opened', postgres: 'opened' });
  });

  it('without better-sqlite3: PostgreSQL opens; a SQLite URL is refused naming the package, and no file is created', () => {
    const file = join(dir, 'missing.db');
    const outcome = openBoth(true, file);
    expect(outcome.postgres).toBe('opened');
    expect(outcome.sqlite).toEqual({
      name: 'DocketError',
      code: 'missing_dependency',
      message: expect.stringContaining('optional package "better-sqlite3", which is not installed'),
    });
    expect((outcome.sqlite as { message: string }).message).toContain('npm install better-sqlite3');
    expect(existsSync(file)).toBe(false);
  });

  it('without better-sqlite3: `docket submit --db sqlite:…` fails with one line naming the package and writes nothing', () => {
    const file = join(dir, 'cli.db');
    const result = runNode(true, [
      resolve(REPO_ROOT, 'src/cli/main.ts'),
      'submit',
      '--db',
      `sqlite:${file}`,
      '--kind',
      'email.send',
    ]);
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^error: SQLite store URLs need the optional package "better-sqlite3".*npm install better-sqlite3/,
    );
    expect(existsSync(file)).toBe(false);
  });
});
