/**
 * `bin/docket.js` runs the CLI inside its own process (no child node), so a SIGTERM sent to it,
 * or forwarded to it by npx, Docker or systemd, reaches the worker: the worker stops gracefully
 * and the process exits 0. Real processes and a real SQLite file; no signal is simulated.
 */
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
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

/** Polls `condition`; `what` is read when the wait fails, so it can report the output by then. */
async function waitFor(condition: () => boolean, ms: number, what: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
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
async function runWorkerThenTerminate(name: string, command: string, args: string[], handlers = HANDLERS) {
  const url = `sqlite:${join(dir, `${name}.db`)}`;
  const marker = join(dir, `${name}.txt`);
  const docket = await Docket.open({ url });
  await docket.submit({ kind: 'touch', payload: { file: marker } });
  const child = spawn(command, [...args, 'work', '--db', url, '--handlers', handlers], {
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
    // A worker that exits early (a handlers file it could not load) fails at once, with its output.
    const ended = () => child.exitCode !== null || child.signalCode !== null;
    await waitFor(
      () => existsSync(marker) || ended(),
      30_000,
      () => `the worker to run the job (output: ${output})`,
    );
    if (!existsSync(marker)) throw new Error(`the worker exited before running the job (output: ${output})`);
    below = descendantsOf(child.pid ?? -1);
    child.kill('SIGTERM');
    const outcome = await Promise.race([
      exited,
      new Promise<'still running'>((r) => setTimeout(() => r('still running'), 20_000)),
    ]);
    await waitFor(
      () => !below.some(isAlive),
      15_000,
      () => `every process under ${command} to end (output: ${output})`,
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

  it('loads a TypeScript handlers file from a project without "type": "module" (CommonJS to tsx)', async () => {
    // The user's project: a package.json with no "type", so tsx compiles handlers.ts as CommonJS.
    // With only tsx's ESM hooks registered, Node's require(esm) refused it as a cycle
    // (ERR_REQUIRE_CYCLE_MODULE) and the worker never started.
    const project = join(dir, 'commonjs-project');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'handlers-project', private: true }));
    const handlers = join(project, 'handlers.ts');
    copyFileSync(HANDLERS, handlers);
    const run = await runWorkerThenTerminate(
      'commonjs',
      process.execPath,
      [resolve(REPO_ROOT, 'bin/docket.js')],
      handlers,
    );
    expect(run.output).not.toMatch(/ERR_REQUIRE/);
    expect(run.outcome, run.output).toEqual({ code: 0, signal: null });
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
