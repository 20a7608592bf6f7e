/**
 * `bin/docket.js` runs the CLI inside its own process (no child node), so a SIGTERM sent to it,
 * or forwarded to it by npx, Docker or systemd, reaches the worker: the worker stops gracefully
 * and the process exits 0. Real processes and a real SQLite file; no signal is simulated.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';

const REPO_ROOT = resolve(import.meta.dirname, '../..');
const HANDLERS = resolve(import.meta.dirname, 'fixtures/touch-handlers.ts');
const dir = mkdtempSync(join(tmpdir(), 'docket-bin-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Direct children of `pid`, from /proc. */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === pid) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

async function waitFor(condition: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** All processes below `pid`. */
function descendantsOf(pid: number): number[] {
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of childrenOf(queue.shift() ?? -1)) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** The process's executable name (`/proc/<pid>/comm`), or '' once it is gone. */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Starts `command args` (a `docket work` with the touch handlers), waits until it ran one job,
 * sends SIGTERM to the started process only, and reports how it and everything below it ended.
 */
async function runWorkerThenTerminate(name: string, command: string, args: string[]) {
  const url = `sqlite:${join(dir, `${name}.db`)}`;
  const marker = join(dir, `${name}.txt`);
  const docket = await Docket.open({ url });
  await docket.submit({ kind: 'touch', payload: { file: marker } });
  const child = spawn(command, [...args, 'work', '--db', url, '--handlers', HANDLERS], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DOCKET_DATABASE_URL: '' },
  });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) =>
    child.once('exit', (code, signal) => resolveExit({ code, signal })),
  );
  let below: number[] = [];
  try {
    await waitFor(() => existsSync(marker), 30_000, `the worker to run the job (output so far: ${output})`);
    below = descendantsOf(child.pid ?? -1);
    child.kill('SIGTERM');
    const outcome = await Promise.race([
      exited,
      new Promise<'still running'>((r) => setTimeout(() => r('still running'), 20_000)),
    ]);
    await waitFor(
      () => !below.some(isAlive),
      15_000,
      `every process under ${command} to end (output: ${output})`,
    ).catch(() => {});
    return { outcome, below, survivors: below.filter(isAlive), output, touched: readFileSync(marker, 'utf8') };
  } finally {
    child.kill('SIGKILL');
    for (const pid of below) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await docket.close();
  }
}

describe('bin/docket.js', () => {
  it('runs `work` in its own process, and SIGTERM stops the worker gracefully with exit 0', async () => {
    const run = await runWorkerThenTerminate('direct', process.execPath, [resolve(REPO_ROOT, 'bin/docket.js')]);
    // In-process: the bin has no node child that a signal could miss. (Run from a clone, the bin
    // loads src/ through tsx, whose esbuild service process may be running: that is no worker.)
    expect(run.below.filter((pid) => commandOf(pid) !== 'esbuild')).toEqual([]);
    expect(run.outcome, run.output).toEqual({ code: 0, signal: null });
    expect(run.output).toMatch(/worker stopped/);
    expect(run.touched).toBe('touched\n');
  });

  it('SIGTERM to `npx docket work` stops the worker that npx runs through a shell, leaving no process behind', async () => {
    const run = await runWorkerThenTerminate('npx', 'npx', ['docket']);
    // npx runs `sh -c docket …`, so there is a node below it that the signal has to reach.
    expect(run.below.length).toBeGreaterThan(0);
    expect(run.outcome).not.toBe('still running');
    expect(run.survivors, run.output).toEqual([]);
    expect(run.output).toMatch(/worker stopped/);
    expect(run.touched).toBe('touched\n');
  });
});
