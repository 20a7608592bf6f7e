/**
 * SQLite-specific behaviour of recurring schedules: two processes sharing one file claim and
 * repair the same schedules at the same pinned instants, and still produce one job per slot.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { normalizeScheduleSpec } from '../../src/schedule/schedule.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

const CHILD = resolve(import.meta.dirname, 'fixtures/sqlite-schedule-child.ts');
const REPO = resolve(import.meta.dirname, '../..');
const dirs: string[] = [];
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Starts the fixture; resolves `ready` when it printed ready and `result` with its last line on exit 0. */
function startChild(
  file: string,
  owner: string,
): { child: ChildProcess; ready: Promise<void>; result: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, file, owner], { cwd: REPO, stdio: 'pipe' });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines: string[] = [];
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolveReady) => {
    onReady = resolveReady;
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line === 'ready') onReady();
    else lines.push(line);
  });
  const result = new Promise<string>((resolveResult, reject) => {
    child.on('exit', (code) => {
      if (code === 0 && lines.length > 0) resolveResult(lines.at(-1) as string);
      else reject(new Error(`child ${owner} exited ${code}: ${stderr}`));
    });
  });
  return { child, ready, result };
}

describe('SqliteStore: recurring schedules across processes', () => {
  it('gives one job per slot when two processes claim and repair the same schedules', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-sqlite-schedule-'));
    dirs.push(dir);
    const file = join(dir, 'docket.db');
    const store = await SqliteStore.open(file);
    try {
      for (const id of ['a', 'b', 'c']) {
        await store.scheduleUpsert({
          spec: normalizeScheduleSpec({ id, cron: '*/2 * * * * *', job: { kind: 'tick', queue: 'q' } }),
          now: new Date(Date.UTC(2026, 4, 1, 12, 0, 0)),
        });
      }
      const kids = [startChild(file, 'p1'), startChild(file, 'p2')];
      await Promise.all(kids.map((kid) => kid.ready));
      for (const kid of kids) kid.child.stdin?.write('go\n');
      const outputs = await Promise.all(kids.map((kid) => kid.result));
      const claimed = outputs.flatMap((line) => (JSON.parse(line) as { slots: number[] }).slots);

      const jobs = await store.jobList({ queue: 'q', limit: 1000 });
      const keys = jobs.map((job) => `${job.scheduleId}@${job.scheduleSlot?.toISOString()}`);
      expect(new Set(keys).size).toBe(keys.length);
      // Slots 12:00:02 … 12:00:40 for three schedules, each claimed by exactly one process.
      expect(claimed).toHaveLength(3 * 20);
      expect(jobs.filter((job) => job.state === 'pending').map((job) => job.scheduleSlot)).toEqual(
        ['a', 'b', 'c'].map(() => new Date(Date.UTC(2026, 4, 1, 12, 0, 42))),
      );
    } finally {
      await store.close();
    }
  }, 60_000);
});
