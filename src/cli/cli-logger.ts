/**
 * The logger `docket work` hands to Docket: pino, writing JSON lines to stdout, the one stream
 * `docket serve` logs to as well, so a log shipper reads both commands the same way. Every line
 * carries `service: "docket"` (as serve's do) and the process id.
 */
import { pino } from 'pino';
import type { Logger } from '../worker/logger.js';

/** The CLI's own logging calls: a message and optional structured fields. */
export interface CliLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** The same pino logger for Docket itself (Docket's Logger takes pino's (fields, message) order). */
  readonly docket: Logger;
}

/** Log levels `--log-level` accepts. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** A pino logger on stdout (fd 1), for the CLI's own lines and for Docket's. */
export function createCliLogger(level: (typeof LOG_LEVELS)[number] = 'info'): CliLogger {
  // Synchronous writes: a worker stopped by a signal must not lose its last lines in a buffer.
  const logger = pino(
    { level, base: { service: 'docket', pid: process.pid } },
    pino.destination({ fd: 1, sync: true }),
  );
  return {
    debug: (message, fields) => logger.debug(fields ?? {}, message),
    info: (message, fields) => logger.info(fields ?? {}, message),
    warn: (message, fields) => logger.warn(fields ?? {}, message),
    error: (message, fields) => logger.error(fields ?? {}, message),
    docket: logger,
  };
}
