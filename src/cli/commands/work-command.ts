/**
 * `docket work`: runs one worker process with the handlers from a user's module until SIGTERM or
 * SIGINT, then stops gracefully: no new claims, running handlers get the grace period, the rest
 * are aborted and their leases released so another worker can take them at once.
 *
 * Every `Docket.open` option and every worker option is a flag, an environment variable and a
 * config-file key (cli-settings.ts). Logs are JSON lines on stdout at info: Docket's worker logs
 * each failed attempt, park, lost lease, stale result and store connection loss and recovery.
 * `--metrics-port` serves `/metrics` and `/health` for a worker-only process.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command } from '@commander-js/extra-typings';
import type { Docket } from '../../docket.js';
import { ConfigurationError } from '../../job/errors.js';
import { redactStoreUrl } from '../../store/open-store.js';
import type { Worker } from '../../worker/worker.js';
import type { WorkerOptions } from '../../worker/worker-options.js';
import { failure, usageError } from '../cli-error.js';
import { createCliLogger, LOG_LEVELS } from '../cli-logger.js';
import {
  type CliSetting,
  DOCKET_SETTINGS,
  describeSource,
  optionFor,
  WORKER_SETTINGS,
  withSettingSource,
} from '../cli-settings.js';
import { loadHandlers } from '../load-handlers.js';
import { type MetricsEndpoint, startMetricsEndpoint } from '../metrics-endpoint.js';
import { databaseOption, openTarget, resolveStoreTarget } from '../open-cli-docket.js';
import { waitForStopSignal } from '../stop-signal.js';

/** The settings of `work` itself (not Docket's): same flag, environment and file-key pattern. */
export const WORK_COMMAND_SETTINGS: readonly CliSetting[] = [
  {
    key: 'handlers',
    flag: '--handlers',
    env: 'DOCKET_HANDLERS',
    kind: 'string',
    description:
      'module whose default export is {kind: handler} or a setup function (docket) => void; it may also export onWorkerStart(worker, docket)',
    defaultText: 'required',
  },
  {
    key: 'logLevel',
    flag: '--log-level',
    env: 'DOCKET_LOG_LEVEL',
    kind: 'choice',
    choices: LOG_LEVELS,
    description: 'level of the JSON log lines on stdout',
    defaultText: 'info',
  },
  {
    key: 'metricsPort',
    flag: '--metrics-port',
    env: 'DOCKET_METRICS_PORT',
    kind: 'integer',
    description: 'serve GET /metrics (Prometheus) and GET /health on this port; 0 picks a free one',
    defaultText: 'off',
  },
  {
    key: 'metricsHost',
    flag: '--metrics-host',
    env: 'DOCKET_METRICS_HOST',
    kind: 'string',
    description: 'address the metrics endpoint listens on (it has no authentication)',
    defaultText: '127.0.0.1',
  },
];

/** The optional second export of a handlers module: called once the worker runs. */
type WorkerStartHook = (worker: Worker, docket: Docket) => unknown;

/** Builds the `work` command. */
export function workCommand() {
  const command = new Command('work').description(
    'run a worker with the handlers a module exports; SIGTERM/SIGINT stop it gracefully (exit 0)',
  );
  for (const setting of [...WORK_COMMAND_SETTINGS, ...WORKER_SETTINGS, ...DOCKET_SETTINGS]) {
    for (const option of optionFor(setting)) command.addOption(option);
  }
  command.addOption(databaseOption());
  return command.action(async (_options, self) => {
    const flags = self.opts() as Record<string, unknown>;
    const target = resolveStoreTarget(flags, {
      service: true,
      extraSettings: [...WORK_COMMAND_SETTINGS, ...WORKER_SETTINGS],
    });
    const values = target.settings.values;
    const handlersPath = values.handlers;
    if (typeof handlersPath !== 'string' || handlersPath === '') {
      throw usageError('--handlers is required (or $DOCKET_HANDLERS, or "handlers" in the --config file)');
    }
    const metricsPort = values.metricsPort;
    if (
      metricsPort !== undefined &&
      (!Number.isInteger(metricsPort) || (metricsPort as number) < 0 || (metricsPort as number) > 65535)
    ) {
      const source = target.settings.sources.get('metricsPort');
      throw usageError(
        `${source ? describeSource(source) : '--metrics-port'}: must be a port from 0 to 65535, got ${JSON.stringify(metricsPort)}`,
      );
    }
    const logger = createCliLogger((values.logLevel as (typeof LOG_LEVELS)[number] | undefined) ?? 'info');
    const docket = await openTarget(target, 'create', logger);
    let metrics: MetricsEndpoint | undefined;
    try {
      const kinds = await loadHandlers(docket, handlersPath);
      const workerOptions: Record<string, unknown> = {};
      for (const setting of WORKER_SETTINGS) {
        if (values[setting.key] !== undefined) workerOptions[setting.key] = values[setting.key];
      }
      const worker = withSources(target.settings.sources, () => docket.worker(workerOptions as WorkerOptions));
      const stopRequested = waitForStopSignal((signal) =>
        logger.warn('second signal: exiting without waiting; unfinished jobs come back when their leases lapse', {
          signal,
        }),
      );
      // Metrics first, so the counters see this worker's very first claims.
      if (metricsPort !== undefined) {
        metrics = await startMetricsEndpoint(docket, worker, {
          port: metricsPort as number,
          host: typeof values.metricsHost === 'string' ? values.metricsHost : '127.0.0.1',
        });
        logger.info('metrics endpoint listening', { url: metrics.url, paths: ['/metrics', '/health'] });
      }
      await withSourcesAsync(target.settings.sources, () => worker.start());
      await runStartHook(handlersPath, worker, docket);
      logger.info('worker started', {
        workerId: worker.id,
        db: target.url === undefined ? (target.options.shards ?? []).map(redactStoreUrl) : redactStoreUrl(target.url),
        handlers: handlersPath,
        kinds: worker.kinds ?? (kinds ? kinds : 'every kind (catch-all)'),
        queues: workerOptions.queues ?? 'all',
      });
      const signal = await stopRequested;
      logger.info('stopping gracefully', { signal });
      await worker.stop();
      logger.info('worker stopped', { workerId: worker.id, ...worker.stats });
    } finally {
      await metrics?.close();
      await docket.close();
    }
  });
}

/** Runs `body`, naming the flag, variable or file key behind a ConfigurationError it throws. */
function withSources<T>(sources: Parameters<typeof withSettingSource>[1], body: () => T): T {
  try {
    return body();
  } catch (error) {
    if (error instanceof ConfigurationError) error.message = withSettingSource(error.message, sources);
    throw error;
  }
}

async function withSourcesAsync<T>(
  sources: Parameters<typeof withSettingSource>[1],
  body: () => Promise<T>,
): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof ConfigurationError) error.message = withSettingSource(error.message, sources);
    throw error;
  }
}

/**
 * Calls the handlers module's `onWorkerStart(worker, docket)` export, if it has one: the place to
 * read `worker.stats` or subscribe to `docket.events` with the worker at hand. The module is
 * already loaded (loadHandlers imported it), so this import returns the same instance.
 */
async function runStartHook(path: string, worker: Worker, docket: Docket): Promise<void> {
  const loaded = (await import(pathToFileURL(resolve(path)).href)) as { onWorkerStart?: unknown };
  if (loaded.onWorkerStart === undefined) return;
  if (typeof loaded.onWorkerStart !== 'function') {
    throw usageError(`--handlers: onWorkerStart in ${resolve(path)} must be a function (worker, docket) => void`);
  }
  try {
    await (loaded.onWorkerStart as WorkerStartHook)(worker, docket);
  } catch (error) {
    throw failure(`--handlers: onWorkerStart in ${resolve(path)} threw: ${(error as Error).message}`);
  }
}
