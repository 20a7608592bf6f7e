/**
 * Runs the real `docket` CLI in a child process, the way users and scripts do: src/cli/main.ts
 * through tsx's loader, so tests exercise the source, never a stale dist/ build.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

/** The repository root (the CLI resolves tsx and relative paths from here). */
export const REPO_ROOT = resolve(import.meta.dirname, '../..');

/** How a finished CLI run ended. */
export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A CLI process still running (`docket work`). */
export interface RunningCli {
  child: ChildProcess;
  /** Everything written so far. */
  output(): { stdout: string; stderr: string };
  /** Resolves when the process exits. */
  exited: Promise<CliResult>;
}

/** Environment for CLI children: no inherited DOCKET_DATABASE_URL, so every test names its store. */
function cliEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  if (!('DOCKET_DATABASE_URL' in extra)) delete env.DOCKET_DATABASE_URL;
  return env;
}

/** Starts `docket <args>` and returns the running process. */
export function startDocket(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; entry?: string[] } = {},
): RunningCli {
  const entry = options.entry ?? ['--import', 'tsx', resolve(REPO_ROOT, 'src/cli/main.ts')];
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: cliEnv(options.env ?? {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<CliResult>((resolveExit, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolveExit({ code, signal, stdout, stderr }));
  });
  return { child, output: () => ({ stdout, stderr }), exited };
}

/** Runs `docket <args>` to completion. */
export function runDocket(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; entry?: string[] } = {},
): Promise<CliResult> {
  return startDocket(args, options).exited;
}

/** A failure message that shows what the CLI printed. */
export function describeRun(result: CliResult): string {
  return `exit ${result.code} (signal ${result.signal})\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
}

/**
 * Runs `docket <args>` inside this process through runCli, the function src/cli/main.ts calls,
 * capturing what it writes to stdout and stderr. Much faster than a child process (no tsx start-up),
 * for tests that run many cases; child-process tests above cover the real executable. Runs are
 * serialised, since stdout and stderr are shared by the whole process.
 */
export async function runDocketInProcess(args: readonly string[]): Promise<CliResult> {
  const previous = inProcessQueue;
  let release = () => {};
  inProcessQueue = new Promise<void>((resolve) => {
    release = resolve;
  });
  await previous;
  const { runCli } = await import('../../src/cli/run-cli.js');
  let stdout = '';
  let stderr = '';
  const originalOut = process.stdout.write.bind(process.stdout);
  const originalErr = process.stderr.write.bind(process.stderr);
  const capture =
    (append: (text: string) => void) =>
    (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
      append(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      callback?.();
      return true;
    };
  process.stdout.write = capture((text) => {
    stdout += text;
  }) as typeof process.stdout.write;
  process.stderr.write = capture((text) => {
    stderr += text;
  }) as typeof process.stderr.write;
  try {
    const code = await runCli(['node', 'docket', ...args]);
    return { code, signal: null, stdout, stderr };
  } finally {
    process.stdout.write = originalOut;
    process.stderr.write = originalErr;
    release();
  }
}

let inProcessQueue: Promise<void> = Promise.resolve();
