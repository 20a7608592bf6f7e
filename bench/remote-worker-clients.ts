/**
 * Entry point of the `remote-workers` workload's client process (bench/remote-workers.ts): the
 * remote HTTP workers of `docket serve`, as a worker in another language would be written, all in
 * this one process so the harness's event loop (and CPU) is not theirs.
 *
 * For each phase the harness sends `start`: `workers` loops, each with its own keep-alive
 * `node:http` agent, each claiming (`POST /v1/worker/claim` with `limit`, `waitMs` and `kinds`)
 * and then completing every job the claim returned by its own `POST /v1/worker/jobs/{id}/complete`,
 * all of one claim's completions at once (Promise.all), before claiming again. Per job it records
 * `Date.now() - Date.parse(job.runAt)` when the claim's answer arrives (lateness; the run time is
 * the database's, whose clock is this host's), and it counts claim requests. It answers `waiting`
 * once every loop's first claim is on the wire, `done` once `expected` distinct jobs of the phase
 * were completed, and on `stop` aborts the claims still waiting (nothing is due by then: the
 * server answers an aborted claim without claiming), lets completions in flight finish and sends
 * the phase's {@link PhaseReport}.
 *
 * Exactly once: a job id answered `done` twice (claimed twice), a payload index completed twice, a
 * job of another phase or index (a stray) and a completion answered 409 (`stale`) are all counted,
 * and the harness fails the run for any of them, or for fewer than `expected` jobs completed. A
 * completion that fails on the network is sent again (a repeated complete answers `done` again;
 * docs/http-api.md), at most {@link COMPLETE_ATTEMPTS} times.
 */
import { Agent, type ClientRequest, request } from 'node:http';

/** One phase's workers, as the harness asks for them. */
export interface PhaseSpec {
  /** Jobs carry `{ i, phase }`: a job of another phase is a stray. */
  phase: string;
  /** The server's base URL. */
  url: string;
  workers: number;
  limit: number;
  waitMs: number;
  kinds: string[];
  /** Distinct jobs (indices 0..expected-1) that make the phase done. */
  expected: number;
}

/** What one phase's workers did. */
export interface PhaseReport {
  /** Claim requests sent before the phase was done (those still waiting then included). */
  claims: number;
  /** Of those, claims answered with no job. */
  emptyClaims: number;
  /** Distinct jobs of this phase answered `done`. */
  completed: number;
  /** Second `done` answers for one job id, or for one payload index. */
  duplicates: number;
  /** Completed jobs of another phase, or with an index outside 0..expected-1. */
  strays: number;
  /** Completions answered 409 `stale`. */
  stale: number;
  /** Completions sent again after a network error. */
  completeRetries: number;
  /** Requests that failed otherwise (network, unexpected status); the first few messages. */
  errorCount: number;
  errors: string[];
  /** Lateness of each distinct completed job at its claim's answer, ms. */
  lateness: number[];
  /** From the first claim sent to the answer of the completion that made the phase done (NaN if never). */
  elapsedMs: number;
  /** This process's CPU time (user + system) from `start` to done (or to `stop`), ms. */
  clientCpuMs: number;
}

/** Messages the harness sends. */
export type ToClients = { type: 'start'; spec: PhaseSpec } | { type: 'stop' } | { type: 'exit' };

/** Messages this process sends. */
export type FromClients =
  | { type: 'waiting' }
  | { type: 'done' }
  | { type: 'stopped'; report: PhaseReport }
  | { type: 'error'; message: string };

/** How often a completion is sent when the network fails it (a repeat is idempotent). */
const COMPLETE_ATTEMPTS = 3;
/** Pause after a failed claim, so a server that is gone is not hammered. */
const CLAIM_ERROR_PAUSE_MS = 100;
/** Error messages kept for the report. */
const KEPT_ERRORS = 5;

interface ClaimedJob {
  id: string | number;
  token: number;
  receipt: string;
  runAt: string;
  payload: { i?: unknown; phase?: unknown } | null;
}

/** One POST with a JSON body; resolves with the status and body text. `onRequest` sees the request first. */
function post(
  agent: Agent,
  url: URL,
  path: string,
  body: string,
  onRequest?: (call: ClientRequest) => void,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const call = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    call.on('error', reject);
    onRequest?.(call);
    call.end(body);
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Job ids answered `done` in any phase of this process: one seen again is a job run twice. */
const doneEver = new Set<string>();

/** One phase: its workers, counters and stop. */
class Phase {
  private readonly report: PhaseReport = {
    claims: 0,
    emptyClaims: 0,
    completed: 0,
    duplicates: 0,
    strays: 0,
    stale: 0,
    completeRetries: 0,
    errorCount: 0,
    errors: [],
    lateness: [],
    elapsedMs: Number.NaN,
    clientCpuMs: Number.NaN,
  };
  private readonly doneIndex: Uint8Array;
  private readonly url: URL;
  private readonly cpuStart = process.cpuUsage();
  private firstClaimAt = Number.NaN;
  private isDone = false;
  private stopping = false;
  private readonly claimsInFlight = new Set<ClientRequest>();
  private readonly agents: Agent[] = [];
  private readonly loops: Promise<void>[];
  private firstClaimsSent = 0;

  constructor(private readonly spec: PhaseSpec) {
    this.doneIndex = new Uint8Array(spec.expected);
    this.url = new URL(spec.url);
    this.loops = Array.from({ length: spec.workers }, (_, k) => this.loop(k));
  }

  private error(message: string): void {
    this.report.errorCount += 1;
    if (this.report.errors.length < KEPT_ERRORS) this.report.errors.push(message);
  }

  private async loop(k: number): Promise<void> {
    const agent = new Agent({ keepAlive: true });
    this.agents.push(agent);
    const body = JSON.stringify({
      workerId: `bench-rw-${this.spec.phase}-${k}`,
      kinds: this.spec.kinds,
      limit: this.spec.limit,
      waitMs: this.spec.waitMs,
    });
    let first = true;
    while (!this.stopping) {
      if (!this.isDone) this.report.claims += 1;
      if (Number.isNaN(this.firstClaimAt)) this.firstClaimAt = performance.now();
      let claimed: ClaimedJob[];
      try {
        const answer = await post(agent, this.url, '/v1/worker/claim', body, (call) => {
          this.claimsInFlight.add(call);
          call.once('close', () => this.claimsInFlight.delete(call));
          if (first) {
            first = false;
            call.once('finish', () => {
              this.firstClaimsSent += 1;
              if (this.firstClaimsSent === this.spec.workers) send({ type: 'waiting' });
            });
          }
        });
        if (answer.status !== 200) throw new Error(`claim answered ${answer.status}: ${answer.body.slice(0, 300)}`);
        claimed = (JSON.parse(answer.body) as { jobs: ClaimedJob[] }).jobs;
      } catch (error) {
        // A claim aborted by the stop is no error.
        if (this.stopping) break;
        this.error((error as Error).message);
        await sleep(CLAIM_ERROR_PAUSE_MS);
        continue;
      }
      if (claimed.length === 0) {
        if (!this.isDone) this.report.emptyClaims += 1;
        continue;
      }
      const now = Date.now();
      await Promise.all(claimed.map((job) => this.complete(agent, job, now - Date.parse(job.runAt))));
    }
  }

  private async complete(agent: Agent, job: ClaimedJob, latenessMs: number): Promise<void> {
    const body = JSON.stringify({ token: job.token, receipt: job.receipt });
    for (let attempt = 1; ; attempt += 1) {
      let answer: { status: number; body: string };
      try {
        answer = await post(agent, this.url, `/v1/worker/jobs/${encodeURIComponent(String(job.id))}/complete`, body);
      } catch (error) {
        if (attempt < COMPLETE_ATTEMPTS) {
          this.report.completeRetries += 1;
          continue;
        }
        this.error(`complete of job ${job.id} failed ${attempt} times: ${(error as Error).message}`);
        return;
      }
      if (answer.status === 409) {
        this.report.stale += 1;
        return;
      }
      if (answer.status !== 200 || !answer.body.includes('"done"')) {
        this.error(`complete of job ${job.id} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
        return;
      }
      this.done(job, latenessMs);
      return;
    }
  }

  private done(job: ClaimedJob, latenessMs: number): void {
    const id = String(job.id);
    if (doneEver.has(id)) {
      this.report.duplicates += 1;
      return;
    }
    doneEver.add(id);
    const i = job.payload?.i;
    if (
      job.payload?.phase !== this.spec.phase ||
      typeof i !== 'number' ||
      !Number.isInteger(i) ||
      i < 0 ||
      i >= this.spec.expected
    ) {
      this.report.strays += 1;
      return;
    }
    if (this.doneIndex[i] === 1) {
      this.report.duplicates += 1;
      return;
    }
    this.doneIndex[i] = 1;
    this.report.completed += 1;
    this.report.lateness.push(latenessMs);
    if (this.report.completed === this.spec.expected && !this.isDone) {
      this.isDone = true;
      this.report.elapsedMs = performance.now() - this.firstClaimAt;
      this.report.clientCpuMs = cpuMsSince(this.cpuStart);
      send({ type: 'done' });
    }
  }

  /** Aborts the claims still waiting, lets the loops end (their completions finish) and reports. */
  async stop(): Promise<PhaseReport> {
    this.stopping = true;
    for (const call of this.claimsInFlight) call.destroy();
    await Promise.all(this.loops);
    for (const agent of this.agents) agent.destroy();
    if (!this.isDone) this.report.clientCpuMs = cpuMsSince(this.cpuStart);
    return this.report;
  }
}

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

function send(message: FromClients): void {
  process.send?.(message);
}

let current: Phase | null = null;

async function stop(): Promise<void> {
  const phase = current;
  current = null;
  if (!phase) throw new Error('stop without a phase');
  send({ type: 'stopped', report: await phase.stop() });
}

function fail(error: unknown): void {
  send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
}

process.on('message', (message: ToClients) => {
  if (message.type === 'start') {
    if (current) fail(new Error('start while a phase runs'));
    else current = new Phase(message.spec);
  } else if (message.type === 'stop') stop().catch(fail);
  else if (message.type === 'exit') {
    process.disconnect?.();
    setTimeout(() => process.exit(0), 50).unref();
  }
});
// The harness died: do not linger as an orphan holding connections to the server.
process.on('disconnect', () => {
  setTimeout(() => process.exit(0), 2_000).unref();
});
