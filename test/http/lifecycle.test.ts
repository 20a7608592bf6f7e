import { describe, expect, it } from 'vitest';
import { startTestServer } from './http-support.js';

/** Timers, sockets and servers this process holds, by kind (e.g. { Timeout: 2, TCPSocketWrap: 1 }). */
function handles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

describe('server lifecycle', () => {
  it('leaves no timer, socket or server behind after close, even with workers and a pending long poll', async () => {
    const before = handles();
    for (let round = 0; round < 3; round++) {
      const t = await startTestServer({
        flags: { concurrency: '2' },
        env: { DOCKET_WEBHOOK_SECRET: 'lifecycle-secret-0123456', DOCKET_WEBHOOK_ALLOW_HOSTS: '*' },
      });
      await t.call('POST', '/v1/jobs', { body: { kind: 'nobody.handles.this', delayMs: 60_000 } });
      const claiming = t.call('POST', '/v1/worker/claim', { body: { workerId: 'w', waitMs: 20_000, queues: ['q'] } });
      await expect.poll(async () => (await t.call('GET', '/metrics')).body).toMatch(/docket_remote_claims_waiting 1/);
      await t.stop();
      expect((await claiming).body).toEqual({ jobs: [] });
    }
    // The fetch client keeps its own idle sockets for a while; compare only what the server side owns.
    await expect
      .poll(() => {
        const after = handles();
        return ['Timeout', 'TCPServerWrap'].map((kind) => (after[kind] ?? 0) - (before[kind] ?? 0));
      })
      .toEqual([0, 0]);
  });

  it('refuses to start on a port already in use, naming the setting', async () => {
    const first = await startTestServer();
    try {
      const port = new URL(first.url).port;
      await expect(startTestServer({ flags: { port } })).rejects.toThrow(
        /port: cannot listen on 127\.0\.0\.1:\d+ \(EADDRINUSE\)/,
      );
    } finally {
      await first.stop();
    }
  });
});
