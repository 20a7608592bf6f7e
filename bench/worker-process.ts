/**
 * The harness's side of worker child processes, and the {@link StartRecorder} that turns their
 * start reports into exactly-once checks.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { SystemConfig } from './systems/system.js';
import type { FromChild, ToChild } from './worker-child.js';

const CHILD_ENTRY = fileURLToPath(new URL('./worker-child.ts', import.meta.url));
/** Linux's USER_HZ: the unit of the CPU times in /proc/<pid>/stat. */
const CLOCK_TICKS_PER_SEC = 100;

/**
 * Every handler start of one run, by bench index. The first start of a job is kept for latency;
 * any further start of the same index is a duplicate, and an index outside the run is a stray:
 * both fail the run.
 */
export class StartRecorder {
  /** Starts per index (a second start is a duplicate run). */
  readonly counts: Uint16Array;
  /** First start per index on the bench's cross-process clock (hostNowMs; NaN until started). */
  readonly startMs: Float64Array;
  /** First start per index, `Date.now()` ms: integer, so comparing it with a run time cannot err early. */
  readonly startDateMs: Float64Array;
  distinct = 0;
  duplicates = 0;
  strays = 0;
  /** The earliest start on the cross-process clock: where a drain's time begins. */
  firstStartMs = Number.POSITIVE_INFINITY;
  private waiters: { target: number; resolve: () => void }[] = [];

  constructor(readonly total: number) {
    this.counts = new Uint16Array(total);
    this.startMs = new Float64Array(total).fill(Number.NaN);
    this.startDateMs = new Float64Array(total).fill(Number.NaN);
  }

  /** Records `[i, hrWallMs, dateNowMs, ...]` triples from a child. */
  record(triples: readonly number[]): void {
    for (let k = 0; k + 2 < triples.length; k += 3) {
      const i = triples[k]!;
      const at = triples[k + 1]!;
      if (!(i >= 0 && i < this.total)) {
        this.strays += 1;
        continue;
      }
      const seen = this.counts[i]!;
      this.counts[i] = Math.min(seen + 1, 65_535);
      if (seen > 0) {
        this.duplicates += 1;
        continue;
      }
      this.distinct += 1;
      const atDate = triples[k + 2]!;
      this.startMs[i] = at;
      this.startDateMs[i] = atDate;
      if (at < this.firstStartMs) this.firstStartMs = at;
    }
    this.waiters = this.waiters.filter((waiter) => {
      if (this.distinct < waiter.target) return true;
      waiter.resolve();
      return false;
    });
  }

  /** Resolves true once `target` distinct jobs started, false when `timeoutMs` passes first. */
  waitFor(target: number, timeoutMs: number): Promise<boolean> {
    if (this.distinct >= target) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((waiter) => waiter !== entry);
        resolve(false);
      }, timeoutMs);
      const entry = {
        target,
        resolve: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      this.waiters.push(entry);
    });
  }
}

/** RSS of one worker process over a run, in bytes. */
export interface RssSummary {
  startBytes: number;
  peakBytes: number;
  endBytes: number;
  samples: { atMs: number; rssBytes: number }[];
}

/** One forked worker process running one system's worker. */
export class WorkerProcess {
  private readonly child: ChildProcess;
  private readonly rss: { atMs: number; rssBytes: number }[] = [];
  private replyWaiter: { type: 'loaded' | 'ready'; resolve: () => void } | null = null;
  private stoppedResolve: (() => void) | null = null;
  private failure: string | null = null;
  private exited = false;
  private stoppedReceived = false;
  /** The Node version the child reported when it started. */
  node = '';

  private constructor(
    private readonly recorder: StartRecorder,
    options: { cpuProfileDir?: string | undefined; nodePath?: string | undefined },
  ) {
    const execArgv = ['--import', 'tsx'];
    if (options.cpuProfileDir) execArgv.push('--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`);
    this.child = fork(CHILD_ENTRY, [], {
      execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      ...(options.nodePath ? { execPath: options.nodePath } : {}),
    });
    this.child.on('message', (message: FromChild) => this.onMessage(message));
    this.child.on('exit', (code, signal) => {
      this.exited = true;
      if (this.stoppedReceived) return;
      this.failure ??= `worker process exited before it was stopped (code ${code}, signal ${signal})`;
      this.replyWaiter?.resolve();
      this.stoppedResolve?.();
    });
  }

  /** Forks a worker process and waits until it has imported its system's modules. */
  static async load(
    config: SystemConfig,
    recorder: StartRecorder,
    options: { cpuProfileDir?: string | undefined; timeoutMs?: number; onForked?: (pid: number) => void } = {},
  ): Promise<WorkerProcess> {
    const worker = new WorkerProcess(recorder, { ...options, nodePath: config.nodePath });
    // Before it loads anything, so all of its work happens wherever the caller put it (a cgroup).
    options.onForked?.(worker.pid);
    await worker.exchange({ type: 'load', config }, 'loaded', options.timeoutMs ?? 60_000);
    return worker;
  }

  /** Starts the worker and waits until it runs. */
  async start(timeoutMs = 60_000): Promise<void> {
    await this.exchange({ type: 'start' }, 'ready', timeoutMs);
  }

  /** Forks, loads and starts `count` processes, starting them together once all have loaded. */
  static async startMany(
    count: number,
    config: SystemConfig,
    recorder: StartRecorder,
    options: { cpuProfileDir?: string | undefined; onForked?: (pid: number) => void } = {},
  ): Promise<WorkerProcess[]> {
    const workers: WorkerProcess[] = [];
    try {
      for (let n = 0; n < count; n += 1) workers.push(await WorkerProcess.load(config, recorder, options));
      await Promise.all(workers.map((worker) => worker.start()));
      return workers;
    } catch (error) {
      for (const worker of workers) worker.kill();
      throw error;
    }
  }

  private async exchange(message: ToChild, reply: 'loaded' | 'ready', timeoutMs: number): Promise<void> {
    const answered = new Promise<void>((resolve) => {
      this.replyWaiter = { type: reply, resolve };
    });
    this.send(message);
    try {
      await withTimeout(answered, timeoutMs, `worker process did not answer ${message.type}`);
    } catch (error) {
      this.kill();
      throw error;
    } finally {
      this.replyWaiter = null;
    }
    if (this.failure) {
      this.kill();
      throw new Error(this.failure);
    }
  }

  /** The child's pid. */
  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** An error the child reported, if any. */
  get error(): string | null {
    return this.failure;
  }

  /** Graceful stop; kills the process if it has not stopped within `timeoutMs`. */
  async stop(timeoutMs = 30_000): Promise<RssSummary> {
    if (!this.exited) {
      const stopped = new Promise<void>((resolve) => {
        this.stoppedResolve = resolve;
      });
      this.send({ type: 'stop' });
      try {
        await withTimeout(stopped, timeoutMs, 'worker process did not stop');
      } catch (error) {
        this.failure ??= (error as Error).message;
        this.kill();
      }
      this.stoppedResolve = null;
    }
    await this.waitExit(5_000);
    return this.rssSummary();
  }

  /** SIGKILL, for cleanup after a failure. Only this harness's own child is signalled. */
  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL');
  }

  private async waitExit(timeoutMs: number): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    try {
      await withTimeout(exited, timeoutMs, 'worker process did not exit');
    } catch {
      this.kill();
    }
  }

  private rssSummary(): RssSummary {
    const values = this.rss.map((sample) => sample.rssBytes);
    return {
      startBytes: values[0] ?? 0,
      peakBytes: values.length > 0 ? Math.max(...values) : 0,
      endBytes: values.at(-1) ?? 0,
      samples: this.rss,
    };
  }

  private send(message: ToChild): void {
    if (this.child.connected) this.child.send(message);
  }

  private onMessage(message: FromChild): void {
    switch (message.type) {
      case 'loaded':
      case 'ready':
        if (message.type === 'ready') this.node = message.node;
        if (this.replyWaiter?.type === message.type) this.replyWaiter.resolve();
        break;
      case 'starts':
        this.recorder.record(message.triples);
        break;
      case 'rss':
        this.rss.push({ atMs: message.atMs, rssBytes: message.rssBytes });
        break;
      case 'stopped':
        this.stoppedReceived = true;
        this.stoppedResolve?.();
        break;
      case 'error':
        this.failure ??= message.message;
        this.replyWaiter?.resolve();
        this.stoppedResolve?.();
        break;
    }
  }
}

/** CPU time (user + system) a process has used so far, ms; NaN where /proc cannot tell. */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    // Fields after the command name (which may hold spaces, hence after the last ')'): utime is
    // the 14th field of the line, stime the 15th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SEC;
  } catch {
    return Number.NaN;
  }
}

/** Rejects with `message` when `promise` has not settled within `ms`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
