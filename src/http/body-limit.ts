/**
 * The request body cap, judged from `Content-Length` without touching the request's Fetch body.
 *
 * Why not `hono/body-limit` for every request: it reads `c.req.raw.body` first, and on
 * `@hono/node-server` that one property turns the lightweight request into a full Fetch
 * `Request` (an `AbortController`, a web `ReadableStream` over the socket, header conversion),
 * and the body is then read through web streams instead of straight from the socket. For a
 * single-job `POST /v1/jobs` that was most of the server's CPU per request (a CPU profile of
 * `docket serve` under 100 clients; docs/benchmarks.md, "Issue 17, eighteenth session"). A body framed by
 * `Content-Length` is judged by that header alone: Node's parser never delivers more bytes than
 * it states. Only a chunked body (`Transfer-Encoding`), whose size is known once read, goes
 * through hono's counting reader. A request with neither header has no body.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';

/** Refuses bodies over `maxBytes` with `onTooLarge`; see the file header. */
export function requestBodyLimit(
  maxBytes: number,
  onTooLarge: (c: Context) => Response | Promise<Response>,
): MiddlewareHandler {
  const countingLimit = bodyLimit({ maxSize: maxBytes, onError: onTooLarge });
  return async (c, next) => {
    if (c.req.header('transfer-encoding') !== undefined) return countingLimit(c, next);
    const declared = c.req.header('content-length');
    if (declared !== undefined && Number(declared) > maxBytes) return onTooLarge(c);
    await next();
  };
}
