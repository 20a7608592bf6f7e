/**
 * Spawns test/integration/fixtures/worker-process.ts as a real process and lets a test wait on the
 * JSON event lines it prints.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'worker-process.ts');

/** One line a child worker printed. */
export interface ChildEvent {
  event: string;
  worker: string;
  id?: string;
  token?: number;
  operation?: string;
  reason?: string;
  [key: string]: unknown;
}

/** A running fixture worker process. */
export interface ChildWorker {
  readonly process: ChildProcess;
  readonly events: ChildEvent[];
  /** Resolves with the first event (already seen or future) matching `predicate`; rejects after `timeoutMs`. */
  waitFor(predicate: (event: ChildEvent) => boolean, timeoutMs?: number): Promise<ChildEvent>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
  stderr(): string;
}

/** Starts a fixture worker with `config` and waits until it prints `ready`. */
export async function startChildWorker(config: Record<string, unknown>): Promise<ChildWorker> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..'),
  });
  const events: ChildEvent[] = [];
  const waiters = new Set<{ predicate: (event: ChildEvent) => boolean; resolve: (event: ChildEvent) => void }>();
  let buffered = '';
  let errText = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      newline = buffered.indexOf('\n');
      if (!line.startsWith('{')) continue;
      const event = JSON.parse(line) as ChildEvent;
      events.push(event);
      for (const waiter of [...waiters]) {
        if (waiter.predicate(event)) {
          waiters.delete(waiter);
          waiter.resolve(event);
        }
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    errText += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const worker: ChildWorker = {
    process: child,
    events,
    exited,
    stderr: () => errText,
    waitFor(predicate, timeoutMs = 15_000) {
      const seen = events.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = {
          predicate,
          resolve: (event: ChildEvent) => {
            clearTimeout(timer);
            resolve(event);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(
            new Error(
              `child ${String(config.id)} printed no matching event within ${timeoutMs} ms; events: ${JSON.stringify(events)}; stderr: ${errText.slice(-2000)}`,
            ),
          );
        }, timeoutMs);
        waiters.add(waiter);
        void exited.then(() => {
          if (!waiters.has(waiter)) return;
          waiters.delete(waiter);
          clearTimeout(timer);
          reject(
            new Error(
              `child ${String(config.id)} exited; events: ${JSON.stringify(events)}; stderr: ${errText.slice(-2000)}`,
            ),
          );
        });
      });
    },
  };
  await worker.waitFor((event) => event.event === 'ready', 30_000);
  return worker;
}

/** Sends SIGTERM and waits for the child to exit (SIGKILL after `timeoutMs`). */
export async function stopChildWorker(worker: ChildWorker, timeoutMs = 10_000): Promise<void> {
  if (worker.process.exitCode !== null || worker.process.signalCode !== null) return;
  worker.process.kill('SIGTERM');
  const timer = setTimeout(() => worker.process.kill('SIGKILL'), timeoutMs);
  await worker.exited;
  clearTimeout(timer);
}
