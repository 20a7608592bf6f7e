/**
 * Helpers for the hostile-client suites: a server with webhooks enabled, a fingerprint of
 * everything the store holds (to prove a refused request wrote nothing), and raw HTTP requests
 * for headers `fetch` will not let a test set (Host).
 */
import { request } from 'node:http';
import type { StoreKind } from '../support/stores.js';
import { startTestServer, type TestServer } from './http-support.js';

/** The webhook signing secret of hostile-suite servers. */
export const HOSTILE_WEBHOOK_SECRET = 'hostile-suite-webhook-secret-0123';

/** A token-protected server with webhooks to any public host, and no local workers. */
export function startHostileServer(kind: StoreKind, extra: Parameters<typeof startTestServer>[0] = {}) {
  return startTestServer({
    kind,
    ...extra,
    env: { DOCKET_WEBHOOK_SECRET: HOSTILE_WEBHOOK_SECRET, DOCKET_WEBHOOK_ALLOW_HOSTS: '*', ...extra.env },
  });
}

/** Everything a request could have written: jobs by state, dead letters, schedules, registry records. */
export async function storeFingerprint(t: TestServer): Promise<string> {
  const store = t.server.docket.store;
  const [stats, schedules, workers, queues] = await Promise.all([
    store.queueStats(),
    store.scheduleList({ limit: 1000 }),
    store.workerList(),
    store.queueList(),
  ]);
  const jobs = await store.jobList({ limit: 1000 });
  return JSON.stringify({
    stats: stats.map(({ unhandled: _ignored, ...counts }) => counts),
    jobs: jobs.map((job) => [job.id, job.state, job.token, job.attempts, job.errors.length]),
    schedules: schedules.map((s) => [s.id, s.updatedAt.toISOString(), s.paused]),
    workers: workers.map((w) => w.id),
    queues: queues.map((q) => [q.name, q.paused]),
  });
}

/** One raw HTTP/1.1 request with exactly these headers (Host included); resolves with status and body. */
export function rawRequest(
  url: string,
  options: { method?: string; path: string; headers: Record<string, string>; body?: string },
): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: options.headers,
        setHost: false,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** An array nested `depth` levels deep around `leaf`. */
export function nested(depth: number, leaf: unknown = 1): unknown {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** JSON text of an array nested `depth` deep (built as text: JSON.stringify itself would recurse). */
export function nestedJsonText(depth: number): string {
  return `${'['.repeat(depth)}1${']'.repeat(depth)}`;
}
