/**
 * The `http-submit` workload's ceiling (bench/http-submit.ts): a bare `node:http` server that
 * does the least a JSON submit endpoint can do, on this machine, for the same client. It reads
 * each request's body, parses it as JSON and answers 201 with a small JSON body, as
 * `POST /v1/jobs` does, but stores nothing and checks nothing else: the gap between it and
 * `docket serve` is the cost of Docket's HTTP stack and its store.
 *
 *   node --import tsx bench/http-floor-server.ts [port]   (0 or none: a free port)
 *
 * It writes `http-floor: serving on http://127.0.0.1:PORT` to stderr once listening (the shape of
 * `docket serve`'s first line, so the harness reads both alike), and on SIGTERM stops accepting,
 * lets the requests in flight finish and exits 0.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const port = Number(process.argv[2] ?? 0);
let created = 0;

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    try {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end('{"error":"the body is not JSON"}');
      return;
    }
    created += 1;
    const body = JSON.stringify({ id: String(created), created: true });
    response.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    response.end(body);
  });
});

server.listen(port, '127.0.0.1', () => {
  const { port: bound } = server.address() as AddressInfo;
  process.stderr.write(`http-floor: serving on http://127.0.0.1:${bound}\n`);
});

process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  // Keep-alive sockets between requests would hold close() open until their idle timeout.
  server.closeIdleConnections();
});
