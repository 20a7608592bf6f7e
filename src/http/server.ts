/**
 * Docket as a service: the HTTP API (a mountable Hono app) and `startServer`, which opens the
 * store, registers the webhook kind, runs local workers and listens, all from one validated
 * {@link ServerConfig}.
 *
 * Safety rules enforced here rather than documented: the server refuses to listen on a
 * non-loopback address without tokens; every /v1 route and /metrics need a token with the right
 * scope when tokens are configured; without tokens (loopback only) every request must name the
 * listen address in `Host` (no DNS rebinding), a present `Origin` must be that same origin, and
 * every write must be `Content-Type: application/json` (no cross-site form or `no-cors` posts);
 * request bodies are capped; `close()` stops accepting, answers the requests in flight within a
 * grace period, then stops workers and closes (if it opened it) the store, leaving no timer.
 *
 * Local workers: only the built-in kinds on their reserved queue, plus the user handlers a
 * `setup` hook registered (`docket serve --handlers FILE`) on the user's queues. Nothing else
 * is ever claimed here (unless `catchAll` asks for it); other kinds wait, pending and counted as
 * unhandled, for remote workers. Both workers take every worker option of the configuration
 * (see `localWorkerOptions` in server-config.ts), and the store every store and Docket option.
 */
import { randomUUID } from 'node:crypto';
import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { serve } from '@hono/node-server';
import type { MiddlewareHandler } from 'hono';
import { Hono } from 'hono';
import { mountDashboard } from '../dashboard/dashboard-page.js';
import { DEFAULT_DASHBOARD_PATH, parseDashboardPath } from '../dashboard/dashboard-path.js';
import { Docket } from '../docket.js';
import { BUILTIN_KINDS, BUILTIN_QUEUE, WEBHOOK_KIND } from '../job/builtin-kinds.js';
import { ConfigurationError } from '../job/errors.js';
import { SERVICE_CONNECT_TIMEOUT_MS } from '../settings.js';
import { redactStoreUrl } from '../store/open-store.js';
import type { WorkerRecord } from '../store/store.js';
import type { WorkerOptions } from '../worker/worker-options.js';
import type { AppEnv } from './app-env.js';
import { type ApiToken, authMiddleware, requireScope, TokenAuthenticator } from './auth.js';
import { requestBodyLimit } from './body-limit.js';
import { dashboardRoutes } from './dashboard-routes.js';
import { errorResponse, HttpError } from './http-error.js';
import { jobRoutes } from './job-routes.js';
import { DocketMetrics } from './metrics.js';
import { openApiDocument } from './openapi.js';
import { remoteWorkerRoutes } from './remote-worker-routes.js';
import { scheduleRoutes } from './schedule-routes.js';
import {
  attributeSettingError,
  isLoopbackHost,
  localWorkerOptions,
  type ServerConfig,
  WORK_ONLY_SETTINGS,
} from './server-config.js';
import { createServerLogger, docketLogger, type ServerLogger } from './server-logger.js';
import { DestinationGuard } from './ssrf-guard.js';
import { withSpan } from './tracing.js';
import { registerWebhookHandler } from './webhook-handler.js';

export { type LoadServerConfigInput, loadServerConfig, type ServerConfig } from './server-config.js';

/** How long close() lets in-flight requests finish before cutting their sockets (default). */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
/**
 * How long a connection accepted before close() may take to send its first request. It was
 * accepted, so its request is answered (with `Connection: close`) rather than reset.
 */
const FIRST_REQUEST_GRACE_MS = 2_000;
/** Media types a write may carry: JSON, or a `+json` type. */
const JSON_MEDIA_TYPE = /^application\/([a-z.+-]*\+)?json\s*(;|$)/i;
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

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
  /** Secret of remote-worker lease receipts; share it between servers of one database. Random when omitted. */
  receiptSecret?: string | undefined;
  /**
   * How often a waiting long poll re-checks the store without a wake-up hint, ms (default 1000):
   * the bound on a lost hint. Tests raise it so that only a wake-up can answer a poll in time.
   */
  longPollRecheckMs?: number | undefined;
  /**
   * Where the operator's dashboard is served, relative to where the app is mounted: `'/'`
   * (default), `'/ops'`, … or false for none. Read by the same parser as `--dashboard-path`.
   */
  dashboardPath?: string | false | undefined;
}

/** Where the app is served, for the tokenless Host and Origin checks. */
export interface ListenAddress {
  host: string;
  port: number;
}

/** The `Host` values a tokenless server answers: loopback names and its own address, with its port. */
export function allowedHostHeaders(listen: ListenAddress): Set<string> {
  const names = new Set([
    '127.0.0.1',
    'localhost',
    '[::1]',
    listen.host.includes(':') && !listen.host.startsWith('[') ? `[${listen.host}]` : listen.host,
  ]);
  const allowed = new Set<string>();
  for (const name of names) {
    allowed.add(`${name.toLowerCase()}:${listen.port}`);
    if (listen.port === 80) allowed.add(name.toLowerCase());
  }
  return allowed;
}

const LOOPBACK_HOST_HEADER = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\])(:\d{1,5})?$/i;

/**
 * Browser safety without tokens. A page the operator visits can send "simple" cross-origin
 * requests (form posts, `text/plain` or no content type) without a preflight, and a DNS-rebinding
 * page can read responses under its own name. So, when no token is configured: `Host` must be
 * the listen address (421 otherwise), a present `Origin` must be that same origin (403), and a
 * write must be `Content-Type: application/json` (415), which no page can send cross-site
 * without a preflight this server never grants.
 */
function browserGuard(listen: () => ListenAddress | undefined): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const host = (c.req.header('host') ?? '').toLowerCase();
    const address = listen();
    const hostAllowed = address ? allowedHostHeaders(address).has(host) : LOOPBACK_HOST_HEADER.test(host);
    if (!hostAllowed) {
      throw new HttpError(
        421,
        'misdirected_request',
        `Host ${JSON.stringify(host.slice(0, 100))} is not this server's address; without tokens only its loopback address is answered`,
        'Host',
      );
    }
    const origin = c.req.header('origin');
    if (origin !== undefined && origin.toLowerCase() !== `http://${host}`) {
      throw new HttpError(
        403,
        'forbidden_origin',
        `cross-origin requests are refused without tokens (Origin ${JSON.stringify(origin.slice(0, 100))})`,
        'Origin',
      );
    }
    if (WRITE_METHODS.has(c.req.method) && !JSON_MEDIA_TYPE.test(c.req.header('content-type') ?? '')) {
      throw new HttpError(
        415,
        'unsupported_media_type',
        'writes need Content-Type: application/json (without tokens, this is what keeps web pages out)',
        'Content-Type',
      );
    }
    return next();
  };
}

/** A store that cannot be opened: which one, and (PostgreSQL) how long opening kept retrying. */
function storeUnavailable(error: unknown, config: ServerConfig): Error {
  const source = config.sources.get('connectTimeoutMs');
  const timeout = config.docketOptions.connectTimeoutMs ?? `${SERVICE_CONNECT_TIMEOUT_MS} (default)`;
  const shown =
    config.db === undefined
      ? `of shards ${(config.docketOptions.shards ?? []).map(redactStoreUrl).join(', ')}`
      : redactStoreUrl(config.db);
  const retried =
    config.db === undefined || /^postgres/i.test(config.db)
      ? ` (connectTimeoutMs: ${timeout}${source === undefined ? '' : `, ${source}`})`
      : '';
  return new Error(`cannot open the store ${shown}: ${(error as Error).message}${retried}`, {
    cause: error,
  });
}

/** A registry record as the API returns it. */
export function workerJson(worker: WorkerRecord) {
  return {
    id: worker.id,
    origin: worker.origin,
    host: worker.host,
    pid: worker.pid,
    version: worker.version,
    queues: worker.queues,
    kinds: worker.kinds,
    excludeKinds: worker.excludeKinds,
    concurrency: worker.concurrency,
    startedAt: worker.startedAt.toISOString(),
    lastSeenAt: worker.lastSeenAt.toISOString(),
    expiresAt: worker.expiresAt.toISOString(),
  };
}

/** A Hono app serving Docket's API, with a `close()` that releases its long polls and event listeners. */
export type DocketApp = Hono<AppEnv> & {
  close(): Promise<void>;
  metrics: DocketMetrics;
  /** Tells a tokenless app its listen address, so `Host` is checked against its port too. */
  setListenAddress(address: ListenAddress): void;
  /** Marks the app draining: every response from now on carries `Connection: close`. */
  startDraining(): void;
};

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
    receiptSecret: config.receiptSecret,
    logger,
    pollIntervalMs: config.longPollRecheckMs,
  });
  const app = new Hono<AppEnv>();
  let listenAddress: ListenAddress | undefined;
  let draining = false;

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
    // While draining, each answer closes its connection, so no client sends another request
    // down a socket that is about to close.
    if (draining) c.res.headers.set('Connection', 'close');
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
  if (!auth.enabled)
    app.use(
      '*',
      browserGuard(() => listenAddress),
    );
  app.use(
    '*',
    requestBodyLimit(config.bodyLimitBytes ?? 1024 * 1024, (c) => {
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
  const dashboard = dashboardRoutes(docket);
  app.route('/v1', dashboard.routes);
  app.route('/v1', jobRoutes(docket, { webhookGuard: config.webhookGuard, random }));
  app.route('/v1', scheduleRoutes(docket, { webhookGuard: config.webhookGuard }));
  app.get('/v1/workers', requireScope('read'), async (c) => {
    return c.json({ workers: (await docket.listWorkers()).map(workerJson) });
  });
  app.route('/v1/worker', worker.routes);
  // Any valid token may ask what it may do: the dashboard hides the actions its token lacks.
  app.get('/v1/whoami', (c) => {
    const principal = c.get('principal');
    return c.json({ name: principal.name, scopes: [...principal.scopes].sort(), authenticated: auth.enabled });
  });

  const page = parseDashboardPath(config.dashboardPath ?? DEFAULT_DASHBOARD_PATH);
  if ('error' in page) throw new ConfigurationError(`dashboardPath: ${page.error}`);
  if (page.path !== false) mountDashboard(app, page.path);

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
    setListenAddress: (address: ListenAddress) => {
      listenAddress = address;
    },
    startDraining: () => {
      draining = true;
    },
    close: async () => {
      metrics.dispose();
      // Live streams end (their responses complete) and bulk walks stop after their batch.
      await dashboard.close();
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
  /**
   * Registers user handlers on the Docket before workers start (`docket serve --handlers FILE`);
   * their kinds get a local worker of their own on `config.queues`.
   */
  setup?: ((docket: Docket) => Promise<unknown>) | undefined;
  /** How long close() lets in-flight requests finish; default {@link DEFAULT_SHUTDOWN_GRACE_MS}. */
  shutdownGraceMs?: number | undefined;
  /** See {@link AppConfig.longPollRecheckMs}. */
  longPollRecheckMs?: number | undefined;
}

/** Per-connection bookkeeping for a graceful close. */
interface ConnectionState {
  acceptedAtMs: number;
  active: number;
  served: number;
}

/**
 * Tracks connections so close() can end each at the right moment: one with a request in flight
 * after its answer (which carries `Connection: close`), an idle kept-alive one at once, and a
 * fresh one (accepted, first request not yet read) once it has sent its request or stayed silent
 * for {@link FIRST_REQUEST_GRACE_MS}.
 *
 * An idle connection is destroyed, not ended: after a half-close the server would still read and
 * run a request the client sent at that very moment, then fail to deliver its answer (a job
 * written, a reset answered). Destroyed, the unread request is never run, so a reset only ever
 * meets a request that was not accepted. A socket with output still buffered is ended instead,
 * so no answer is truncated.
 */
function trackConnections(server: HttpServer) {
  const connections = new Map<Socket, ConnectionState>();
  server.on('connection', (socket: Socket) => {
    connections.set(socket, { acceptedAtMs: Date.now(), active: 0, served: 0 });
    socket.once('close', () => connections.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const state = connections.get(req.socket);
    if (!state) return;
    state.active++;
    res.once('close', () => {
      state.active--;
      state.served++;
    });
  });
  /** Closes what can be closed now; true when no connection is left. */
  const sweep = (): boolean => {
    const now = Date.now();
    for (const [socket, state] of connections) {
      if (state.active > 0) continue;
      if (state.served === 0 && now - state.acceptedAtMs < FIRST_REQUEST_GRACE_MS) continue;
      if (socket.writableLength > 0) socket.end();
      else socket.destroy();
    }
    return connections.size === 0;
  };
  return {
    sweep,
    destroyAll: () => {
      for (const socket of connections.keys()) socket.destroy();
    },
  };
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
  for (const key of config.ignoredSettings ?? []) {
    logger.warn(
      { setting: key, reason: WORK_ONLY_SETTINGS[key] },
      `config file setting ${key} applies to docket work only`,
    );
  }
  const docket =
    options.docket ??
    (await Docket.open({
      url: config.db,
      schema: config.schema,
      ...config.docketOptions,
      logger: docketLogger(logger),
    }).catch((error: unknown) => {
      const attributed = attributeSettingError(error, config);
      throw attributed !== error ? attributed : storeUnavailable(error, config);
    }));
  let app: DocketApp | undefined;
  const workers: ReturnType<Docket['worker']>[] = [];
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
    if (options.setup) await options.setup(docket);
    app = createApp(docket, {
      tokens: config.tokens,
      bodyLimitBytes: config.bodyLimitBytes,
      maxLongPollMs: config.maxLongPollMs,
      webhookGuard,
      random: options.random,
      logger,
      receiptSecret: config.receiptSecret,
      longPollRecheckMs: options.longPollRecheckMs,
      dashboardPath: config.dashboardPath,
    });
    const userKinds = docket.handledKinds().filter((kind) => !BUILTIN_KINDS.includes(kind));
    const [builtinOptions, handlersOptions] = localWorkerOptions(config, userKinds);
    const runsHandlersWorker =
      userKinds.length > 0 || handlersOptions.kinds !== undefined || handlersOptions.catchAll === true;
    if (config.concurrency > 0) {
      // Settings errors (a kinds entry without a handler, say) name the flag, variable or file key.
      const startWorker = async (workerOptions: WorkerOptions) => {
        try {
          const worker = docket.worker(workerOptions);
          workers.push(worker);
          await worker.start();
        } catch (error) {
          throw attributeSettingError(error, config);
        }
      };
      if (webhookGuard) await startWorker(builtinOptions);
      if (runsHandlersWorker) await startWorker(handlersOptions);
    }
    const runningApp = app;
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
        workers: {
          builtin: config.concurrency > 0 && webhookGuard ? { kinds: [WEBHOOK_KIND], queue: BUILTIN_QUEUE } : 'none',
          handlers:
            config.concurrency > 0 && runsHandlersWorker
              ? (handlersOptions.kinds ?? 'every kind (catchAll)')
              : 'none (remote workers run other kinds)',
          concurrency: config.concurrency,
        },
        webhooks: webhookGuard ? { allowHosts: config.webhookAllowHosts } : 'disabled',
      },
      'docket server listening',
    );
    runningApp.setListenAddress({ host: config.host, port: address.port });
    const connections = trackConnections(server);
    const graceMs = options.shutdownGraceMs ?? config.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
    let closing: Promise<void> | undefined;
    return {
      url,
      docket,
      app: runningApp,
      close: () => {
        closing ??= (async () => {
          // 1. Stop accepting: new connections are refused cleanly from here on.
          runningApp.startDraining();
          const closed = new Promise<void>((resolve) => server.close(() => resolve()));
          // 2. Answer long polls now (empty), then every request in flight, each closing its
          //    connection; idle ones close at once, fresh ones once their request is answered.
          await runningApp.close();
          const deadline = Date.now() + graceMs;
          await new Promise<void>((resolve) => {
            const tick = () => {
              if (connections.sweep()) return resolve();
              // 3. Past the grace, cut what is left: a handler stuck that long is not answering.
              if (Date.now() >= deadline) {
                connections.destroyAll();
                return resolve();
              }
              setTimeout(tick, 25);
            };
            tick();
          });
          await closed;
          await Promise.all(workers.map((w) => w.stop()));
          if (ownsDocket) await docket.close();
          logger.info({}, 'docket server stopped');
        })();
        return closing;
      },
    };
  } catch (error) {
    await app?.close();
    await Promise.all(workers.map((w) => w.stop()));
    if (ownsDocket) await docket.close();
    throw error;
  }
}
