/**
 * The `http-submit` workload: single submits the way a service's clients make them, one
 * `POST /v1/jobs` each to `docket serve` with its default settings (a user's first `docket
 * serve`), from the bench process over keep-alive connections. Beside them, the same client
 * against a bare `node:http` server that only parses the body and answers 201 (bench/http-floor-server.ts):
 * the ceiling of this client on this machine, which every row is divided by.
 *
 * Each run starts its own server child on a fresh store (the Docket driver's reset: a new
 * PostgreSQL database, or SQLite file, migrated), sends `n` requests from `inFlight` callers that
 * each send again as soon as their answer arrives, checks that every answer was 201 and that the
 * store then holds `n` due jobs, and stops the server (SIGTERM, its exit awaited; SIGKILL after
 * 10 s), also when the run failed. The server of `docket-baseline` (and `docket-sqlite-baseline`)
 * is the DOCKET_BASELINE checkout's own CLI, so a server change is measured against the code it
 * replaces in the same rounds.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { THIS_CHECKOUT } from './checkouts.js';
import { hostNowMs } from './pg-admin.js';
import { distribution } from './stats.js';
import { DOCKET_BENCH_KIND, DOCKET_BENCH_SCHEMA } from './systems/docket.js';
import type { SystemName } from './systems/system.js';
import { processCpuMs } from './worker-process.js';
import {
  type Contender,
  fail,
  prefixed,
  type RunOptions,
  type RunRecord,
  type RunSubject,
  record,
} from './workloads.js';

/** The Docket systems whose store `docket serve` can open, each from its own checkout. */
export const SERVE_SYSTEMS: readonly SystemName[] = [
  'docket',
  'docket-sqlite',
  'docket-baseline',
  'docket-sqlite-baseline',
];

/** The floor's label in the records and the report. */
export const HTTP_FLOOR_LABEL = 'http floor (bare node:http, no store)';

/** How long a server may take to say where it listens (tsx compiles the CLI on a cold cache). */
const START_TIMEOUT_MS = 60_000;
/** How long a server may take to exit after SIGTERM before it is killed (its own grace is 10 s). */
export const STOP_TIMEOUT_MS = 10_000;

/** A server the workload starts: how to start it, and the Docket store it writes to, if any. */
export interface HttpSubmitTarget extends RunSubject {
  /** Node binary, arguments and working directory of the server process. */
  command: { node: string; args: string[]; cwd: string };
  /** The store the server writes to (reset before a run, counted after); none for the floor. */
  store?: Contender;
  /** Why this server cannot start here (no DOCKET_BASELINE, no CLI in the checkout), or null. */
  unavailable: string | null;
}

/** `node --import <checkout's tsx> <script> …`, the way the CLI runs from a checkout. */
export function tsxCommand(
  checkout: string,
  node: string,
  script: string,
  args: string[],
): HttpSubmitTarget['command'] {
  return {
    node,
    args: ['--import', join(checkout, 'node_modules/tsx/dist/esm/index.mjs'), join(checkout, script), ...args],
    cwd: checkout,
  };
}

/**
 * `docket serve` on a Docket driver's store, from that driver's checkout (DOCKET_BASELINE for the
 * baseline systems) and on its Node (`--docket-node`, `--baseline-node`): every setting default
 * but the store, the schema the driver uses and a free port.
 */
export function docketServeTarget(contender: Contender): HttpSubmitTarget {
  const name = contender.module.name;
  if (!SERVE_SYSTEMS.includes(name)) throw new Error(`the http-submit workload cannot serve ${name}`);
  const baseline = name === 'docket-baseline' || name === 'docket-sqlite-baseline';
  const checkout = (baseline ? process.env.DOCKET_BASELINE : THIS_CHECKOUT) ?? '';
  const cli = join(checkout, 'src/cli/main.ts');
  const unavailable = !checkout
    ? `${name} needs DOCKET_BASELINE=<a checkout of Docket with node_modules>`
    : existsSync(cli)
      ? null
      : `${cli} does not exist`;
  const url = contender.config.databaseUrl;
  const storeArgs = url.startsWith('sqlite:') ? ['--db', url] : ['--db', url, '--schema', DOCKET_BENCH_SCHEMA];
  return {
    label: `${name} serve`,
    variant: 'default',
    module: contender.module,
    store: contender,
    command: tsxCommand(checkout, contender.config.nodePath ?? process.execPath, 'src/cli/main.ts', [
      'serve',
      ...storeArgs,
      '--port',
      '0',
    ]),
    unavailable,
  };
}

/** The bare node:http server (bench/http-floor-server.ts), on the harness's Node. */
export function httpFloorTarget(): HttpSubmitTarget {
  return {
    label: HTTP_FLOOR_LABEL,
    variant: 'default',
    module: { name: 'http-floor' },
    command: tsxCommand(THIS_CHECKOUT, process.execPath, 'bench/http-floor-server.ts', ['0']),
    unavailable: null,
  };
}

/** Server children still running: killed if the harness exits without stopping them. */
const liveServers = new Set<ChildProcess>();
let exitHookInstalled = false;
function killLiveServersOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of liveServers) child.kill('SIGKILL');
  });
}

/** One server child: started, read for its URL, stopped. */
export class ServerChild {
  private stderr = '';
  private readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exited = false;
  private stopping = false;

  private constructor(
    private readonly child: ChildProcess,
    private readonly logPath: string,
  ) {
    liveServers.add(child);
    this.exit = new Promise((resolve) => {
      const exited = (code: number | null, signal: NodeJS.Signals | null) => {
        this.exited = true;
        liveServers.delete(child);
        resolve({ code, signal });
      };
      child.once('exit', exited);
      // A process that never started (no such Node binary) has no 'exit' to wait for.
      child.once('error', () => {
        if (child.pid === undefined) exited(null, null);
      });
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      // Only the first lines matter (the URL, or why it did not start); keep the tail bounded.
      this.stderr = (this.stderr + chunk.toString('utf8')).slice(-8_000);
    });
  }

  /** Starts the server, its stdout (JSON log lines, one a request) to `logPath`; resolves with its URL. */
  static async start(
    command: HttpSubmitTarget['command'],
    logPath: string,
  ): Promise<{ server: ServerChild; url: URL }> {
    killLiveServersOnExit();
    // A user's first `docket serve`: none of this shell's DOCKET_* settings (DOCKET_BASELINE, …).
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('DOCKET_')));
    const log = openSync(logPath, 'w');
    let child: ChildProcess;
    try {
      child = spawn(command.node, command.args, { cwd: command.cwd, env, stdio: ['ignore', log, 'pipe'] });
    } finally {
      closeSync(log);
    }
    const server = new ServerChild(child, logPath);
    const url = await new Promise<URL>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "serving on" line within ${START_TIMEOUT_MS} ms: ${server.diagnostics()}`)),
        START_TIMEOUT_MS,
      );
      const onData = () => {
        const match = /serving on (http:\/\/\S+)/.exec(server.stderr);
        if (!match?.[1]) return;
        clearTimeout(timer);
        child.stderr?.off('data', onData);
        resolve(new URL(match[1]));
      };
      child.stderr?.on('data', onData);
      void server.exit.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(
          new Error(`the server exited (code ${code}, signal ${signal}) before listening: ${server.diagnostics()}`),
        );
      });
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    }).catch(async (error: unknown) => {
      await server.stop();
      throw error;
    });
    return { server, url };
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether it exited on its own (a crash), before {@link stop}. */
  get crashed(): boolean {
    return this.exited && !this.stopping;
  }

  /** Its stderr and the end of its log, for a failure message. */
  diagnostics(): string {
    let log = '';
    try {
      log = readFileSync(this.logPath, 'utf8').slice(-1_500);
    } catch {
      // No log yet: the process never started.
    }
    return `stderr: ${this.stderr.trim().slice(-1_500) || '(none)'}; log: ${log.trim() || '(none)'}`;
  }

  /** SIGTERM, then its exit awaited; SIGKILL after {@link STOP_TIMEOUT_MS}. Resolves with how it exited. */
  async stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; killed: boolean }> {
    this.stopping = true;
    if (this.exited) return { ...(await this.exit), killed: false };
    this.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS);
    });
    const first = await Promise.race([this.exit, timedOut]);
    clearTimeout(timer);
    if (first !== 'timeout') return { ...first, killed: false };
    this.child.kill('SIGKILL');
    return { ...(await this.exit), killed: true };
  }
}

/** One POST with a JSON body; resolves with the status, and the body when it is not 201. */
function postJson(agent: Agent, url: URL, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const call = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: '/v1/jobs',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (response) => {
        const status = response.statusCode ?? 0;
        response.on('error', reject);
        if (status === 201) {
          // The answer is read off the socket (so it can carry the next request) but not kept.
          response.resume();
          response.on('end', () => resolve({ status, body: '' }));
          return;
        }
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    call.on('error', reject);
    call.end(body);
  });
}

/**
 * One run: `n` `POST /v1/jobs` (body `{"kind":"bench.noop","payload":{"i":i}}`, with a fresh
 * `"idempotencyKey"` when `keyed`) from `inFlight` callers over one keep-alive agent of as many
 * sockets. Jobs/s is n over the time from the first request to the last answer; call time is a
 * request's start to its answer's end; server CPU is the server process's user + system time
 * over the same span, per request. Any answer but 201 fails the run with its body.
 */
export async function httpSubmitRun(
  target: HttpSubmitTarget,
  n: number,
  inFlight: number,
  options: RunOptions & { keyed?: boolean; logDir: string },
): Promise<RunRecord> {
  const keyed = options.keyed === true;
  const run = record(target, 'http-submit', options, { jobs: n, inFlight, mode: keyed ? 'keyed' : 'plain' });
  const wallStart = hostNowMs();
  const agent = new Agent({ keepAlive: true, maxSockets: inFlight });
  let server: ServerChild | undefined;
  try {
    if (target.store) await target.store.module.reset(target.store.config);
    const logPath = join(options.logDir, `${target.module.name}-r${options.round}-${keyed ? 'keyed' : 'plain'}.log`);
    const started = await ServerChild.start(target.command, logPath);
    server = started.server;
    // Made before the clock starts: the bodies are the client's, not the server's work.
    const runId = randomUUID().slice(0, 8);
    const bodies = Array.from({ length: n }, (_, i) =>
      JSON.stringify({
        kind: DOCKET_BENCH_KIND,
        payload: { i },
        ...(keyed ? { idempotencyKey: `job-${runId}-${i}` } : {}),
      }),
    );
    const callMs = new Float64Array(n).fill(Number.NaN);
    let firstProblem: string | null = null;
    let next = 0;
    const cpuBeforeMs = processCpuMs(server.pid);
    const t0 = hostNowMs();
    await Promise.all(
      Array.from({ length: Math.min(inFlight, n) }, async () => {
        // A failure stops every caller: the run is failed either way, and requests to a server
        // about to be stopped would only add refused connections to its message.
        for (let i = next++; i < n && firstProblem === null; i = next++) {
          const at = hostNowMs();
          try {
            const answer = await postJson(agent, started.url, bodies[i]!);
            if (answer.status !== 201) {
              firstProblem ??= `request ${i} answered ${answer.status}: ${answer.body.slice(0, 500)}`;
              return;
            }
          } catch (error) {
            firstProblem ??= `request ${i} failed: ${(error as Error).message}`;
            return;
          }
          callMs[i] = hostNowMs() - at;
        }
      }),
    );
    const elapsedMs = hostNowMs() - t0;
    const serverCpuMs = processCpuMs(server.pid) - cpuBeforeMs;
    const answered = firstProblem === null;
    if (!answered) fail(run, server.crashed ? `${firstProblem}; ${server.diagnostics()}` : String(firstProblem));
    else
      Object.assign(run.metrics, prefixed('call', distribution(callMs)), {
        jobsPerSec: n / (elapsedMs / 1000),
        seconds: elapsedMs / 1000,
        ...(Number.isFinite(serverCpuMs) ? { serverCpuUsPerRequest: (serverCpuMs * 1000) / n } : {}),
      });
    const stopped = await server.stop();
    if (stopped.killed) fail(run, `the server did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM`, 'error');
    else if (stopped.code !== 0)
      fail(
        run,
        `the server exited with code ${stopped.code} (signal ${stopped.signal}): ${server.diagnostics()}`,
        'error',
      );
    // Counted once the server is gone, so the count competes with nothing; a run whose requests
    // failed is failed already, and its count would only repeat that.
    if (target.store && answered) {
      const store = await target.store.module.openStore(target.store.config);
      try {
        const left = await store.remainingDue();
        run.metrics.jobsInStore = left;
        if (left !== n) fail(run, `${left} jobs due after ${n} answered submits (each 201 must leave one job)`);
      } finally {
        await store.close();
      }
    }
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    agent.destroy();
    await server?.stop();
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}
