/**
 * Docket as a service: the HTTP API (a mountable Hono app) and `startServer`, which opens the
 * store, registers the webhook kind, runs local workers and listens, all from one validated
 * {@link ServerConfig}.
 *
 * Safety rules enforced here rather than documented: the server refuses to listen on a
 * non-loopback address without tokens; every /v1 route and /metrics need a token with the right
 * scope when tokens are configured; request bodies are capped; `close()` releases long polls,
 * stops workers, closes sockets and (if it opened it) the store, leaving no timer behind.
 */
import { randomUUID } from 'node:crypto';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { Docket } from '../docket.js';
import { ConfigurationError } from '../job/errors.js';
import type { AppEnv } from './app-env.js';
import { type ApiToken, authMiddleware, requireScope, TokenAuthenticator } from './auth.js';
import { errorResponse, HttpError } from './http-error.js';
import { jobRoutes } from './job-routes.js';
import { DocketMetrics } from './metrics.js';
import { openApiDocument } from './openapi.js';
import { remoteWorkerRoutes } from './remote-worker-routes.js';
import { scheduleRoutes } from './schedule-routes.js';
import { isLoopbackHost, type ServerConfig } from './server-config.js';
import { createServerLogger, docketLogger, type ServerLogger } from './server-logger.js';
import { DestinationGuard } from './ssrf-guard.js';
import { withSpan } from './tracing.js';
import { registerWebhookHandler } from './webhook-handler.js';

export { type LoadServerConfigInput, loadServerConfig, type ServerConfig } from './server-config.js';

/** How long close() lets in-flight requests finish before cutting their sockets. */
const CLOSE_GRACE_MS = 5000;

/** Settings of {@link createApp}; every field is optional. */
export interface AppConfig {
  /** Bearer tokens; none means every request is trusted (only safe on loopback). */
  tokens?: readonly ApiToken[] | undefined;
  /** Largest request body, bytes (default 1 MiB). */
  bodyLimitBytes?: number | undefined;
  /** Longest remote-claim long poll, ms (default 30 000). */
  maxLongPollMs?: number | undefined;
  /** Checks webhook destinations at submit; without it, webhook jobs are refused with a 400. */
  webhookGuard?: DestinationGuard | undefined;
  /** Uniform [0, 1) source for jitter and backoff. */
  random?: (() => number) | undefined;
  /** Request and error logs; silent when omitted. */
  logger?: ServerLogger | undefined;
}

/** A Hono app serving Docket's API, with a `close()` that releases its long polls and event listeners. */
export type DocketApp = Hono<AppEnv> & { close(): Promise<void>; metrics: DocketMetrics };

/** Builds the API for `docket`; mount it in any Hono app or serve it as is. */
export function createApp(docket: Docket, config: AppConfig = {}): DocketApp {
  const logger = config.logger ?? createServerLogger('silent');
  const auth = new TokenAuthenticator(config.tokens ?? []);
  const metrics = new DocketMetrics(docket);
  const random = config.random ?? Math.random;
  const worker = remoteWorkerRoutes(docket, {
    metrics,
    maxLongPollMs: config.maxLongPollMs ?? 30_000,
    random,
  });
  const app = new Hono<AppEnv>();

  app.use('*', async (c, next) => {
    const requestId = randomUUID();
    c.set('requestId', requestId);
    const startedAt = performance.now();
    await withSpan(`HTTP ${c.req.method}`, 'server', { 'http.request.method': c.req.method }, async (span) => {
      await next();
      const route = c.req.routePath;
      span.updateName(`${c.req.method} ${route}`);
      span.setAttribute('http.route', route);
      span.setAttribute('http.response.status_code', c.res.status);
    });
    const route = c.req.routePath;
    metrics.httpRequests.inc({ method: c.req.method, route, status: String(c.res.status) });
    logger.info(
      {
        requestId,
        method: c.req.method,
        route,
        status: c.res.status,
        durationMs: Math.round(performance.now() - startedAt),
        principal: c.get('principal')?.name,
      },
      'request',
    );
  });
  app.use(
    '*',
    bodyLimit({
      maxSize: config.bodyLimitBytes ?? 1024 * 1024,
      onError: (c) => {
        // The unread rest of the body is discarded by closing the socket; saying so keeps a
        // pooling client from sending its next request down a connection about to close.
        c.header('Connection', 'close');
        return c.json(
          {
            error: {
              code: 'body_too_large',
              field: 'body',
              message: `body: is over the ${config.bodyLimitBytes ?? 1024 * 1024}-byte limit`,
            },
          },
          413,
        );
      },
    }),
  );

  app.get('/health', (c) => c.json({ status: 'ok' }));
  app.get('/ready', async (c) => {
    try {
      await docket.store.now();
      return c.json({ status: 'ready' });
    } catch {
      return c.json({ status: 'not_ready', message: 'the store does not answer' }, 503);
    }
  });
  const document = openApiDocument();
  app.get('/openapi.json', (c) => c.json(document));

  app.use('/metrics', authMiddleware(auth), requireScope('read'));
  app.get('/metrics', async (c) => {
    c.header('Content-Type', metrics.registry.contentType);
    return c.body(await metrics.render());
  });

  app.use('/v1/*', authMiddleware(auth));
  app.route('/v1', jobRoutes(docket, { webhookGuard: config.webhookGuard, random }));
  app.route('/v1', scheduleRoutes(docket));
  app.route('/v1/worker', worker.routes);

  app.notFound((c) => c.json({ error: { code: 'not_found', message: `no route ${c.req.method} ${c.req.path}` } }, 404));
  app.onError((error, c) => {
    if (!(error instanceof HttpError) && !(error instanceof Error && error.name === 'ValidationError')) {
      // Only the message and name: a stack or an error's fields can hold payload fragments.
      logger.error(
        {
          requestId: c.get('requestId'),
          route: c.req.routePath,
          errorName: (error as Error).name,
          error: (error as Error).message,
        },
        'request failed',
      );
    }
    return errorResponse(c, error);
  });

  return Object.assign(app, {
    metrics,
    close: async () => {
      metrics.dispose();
      await worker.close();
    },
  });
}

/** A server started by {@link startServer}. */
export interface RunningServer {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** The Docket behind it (opened from the config unless one was passed in). */
  docket: Docket;
  app: DocketApp;
  /** Stops listening, releases long polls, stops workers and closes what it opened. Idempotent. */
  close(): Promise<void>;
}

/** Inputs of {@link startServer}. */
export interface StartServerOptions {
  config: ServerConfig;
  /** Serve this Docket instead of opening `config.db` (it is not closed by `close()`). */
  docket?: Docket | undefined;
  /** Defaults to JSON lines on stdout at `config.logLevel`. */
  logger?: ServerLogger | undefined;
  random?: (() => number) | undefined;
}

/** Starts the API and (with concurrency > 0) local workers; resolves once listening. */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const { config } = options;
  if (!isLoopbackHost(config.host) && config.tokens.length === 0) {
    throw new ConfigurationError(
      `host: refusing to listen on non-loopback address ${config.host} without authentication; configure tokens`,
    );
  }
  const logger = options.logger ?? createServerLogger(config.logLevel);
  const ownsDocket = options.docket === undefined;
  const docket =
    options.docket ?? (await Docket.open({ url: config.db, schema: config.schema, logger: docketLogger(logger) }));
  let app: DocketApp | undefined;
  let worker: ReturnType<Docket['worker']> | undefined;
  try {
    let webhookGuard: DestinationGuard | undefined;
    if (config.webhookSecret) {
      webhookGuard = new DestinationGuard({
        allowHosts: config.webhookAllowHosts,
        allowAddresses: config.webhookAllowAddresses,
      });
      registerWebhookHandler(docket, {
        secret: config.webhookSecret,
        guard: webhookGuard,
        timeoutMs: config.webhookTimeoutMs,
        retryAfterCapMs: config.webhookRetryAfterCapMs,
      });
    } else {
      logger.info({}, 'webhook jobs disabled: no webhook signing secret ($DOCKET_WEBHOOK_SECRET)');
    }
    app = createApp(docket, {
      tokens: config.tokens,
      bodyLimitBytes: config.bodyLimitBytes,
      maxLongPollMs: config.maxLongPollMs,
      webhookGuard,
      random: options.random,
      logger,
    });
    if (config.concurrency > 0) {
      worker = docket.worker({ concurrency: config.concurrency, queues: config.queues, leaseMs: config.leaseMs });
      await worker.start();
    }
    const fetch = app.fetch;
    const server = await new Promise<HttpServer>((resolve, reject) => {
      // Without a createServer option, serve() builds a plain node:http server.
      const s = serve({ fetch, port: config.port, hostname: config.host }, () => resolve(s as HttpServer));
      s.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new ConfigurationError(
            `port: cannot listen on ${config.host}:${config.port} (${error.code ?? error.message})`,
          ),
        ),
      );
    });
    const address = server.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    const url = `http://${host}:${address.port}`;
    logger.info(
      {
        url,
        auth: config.tokens.length > 0 ? { tokens: config.tokens.map((t) => t.name) } : 'off (loopback only)',
        workers: config.concurrency,
        webhooks: webhookGuard ? { allowHosts: config.webhookAllowHosts } : 'disabled',
      },
      'docket server listening',
    );
    const runningApp = app;
    const runningWorker = worker;
    let closing: Promise<void> | undefined;
    return {
      url,
      docket,
      app: runningApp,
      close: () => {
        closing ??= (async () => {
          // Release long polls first so their responses go out before the sockets are closed.
          await runningApp.close();
          await new Promise<void>((resolve) => {
            server.close(() => resolve());
            // close() waits for every keep-alive socket to time out (seconds). Sweep sockets as
            // their last response ends instead, and cut whatever is still busy after the grace.
            const sweep = setInterval(() => server.closeIdleConnections(), 20);
            const force = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
            server.once('close', () => {
              clearInterval(sweep);
              clearTimeout(force);
            });
            server.closeIdleConnections();
          });
          if (runningWorker) await runningWorker.stop();
          if (ownsDocket) await docket.close();
          logger.info({}, 'docket server stopped');
        })();
        return closing;
      },
    };
  } catch (error) {
    await app?.close();
    await worker?.stop();
    if (ownsDocket) await docket.close();
    throw error;
  }
}
