/**
 * `docket work --metrics-port`: the same Prometheus metrics `docket serve` exposes (src/http/metrics.ts,
 * fed by this process's Docket events and read from the store at scrape time) and a `/health`
 * answer, for a worker-only process that has no HTTP API. A plain node:http server: two read-only
 * routes need no framework, and nothing else is reachable on it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Docket } from '../docket.js';
import type { Worker } from '../worker/worker.js';

/** A running metrics endpoint. */
export interface MetricsEndpoint {
  /** `http://host:port`. */
  url: string;
  close(): Promise<void>;
}

/** Listens on `host:port` and serves `GET /metrics` and `GET /health` until closed. */
export async function startMetricsEndpoint(
  docket: Docket,
  worker: Worker,
  listen: { host: string; port: number },
): Promise<MetricsEndpoint> {
  // Loaded on demand: prom-client is not worth loading for a worker that exposes no metrics.
  const { DocketMetrics } = await import('../http/metrics.js');
  const metrics = new DocketMetrics(docket);
  const server: Server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    if (path === '/health') {
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: 'ok', workerId: worker.id, stats: worker.stats }));
      return;
    }
    if (path === '/metrics') {
      metrics.render().then(
        (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (error: unknown) =>
          response
            .writeHead(503, { 'content-type': 'text/plain' })
            .end(`metrics unavailable: ${error instanceof Error ? error.message : String(error)}\n`),
      );
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics or /health\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        metrics.dispose();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
