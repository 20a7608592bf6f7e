/**
 * The logger long-running commands (`docket work`, `docket serve`) hand to Docket: pino, writing
 * JSON lines to stderr so stdout stays free for results.
 */
import { pino } from 'pino';

/** Docket's Logger shape: a message and optional structured fields. */
export interface CliLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** Log levels `--log-level` accepts. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;

/** A pino logger on stderr (fd 2) adapted to Docket's Logger. */
export function createCliLogger(level: (typeof LOG_LEVELS)[number] = 'info'): CliLogger {
  const logger = pino({ level, base: { pid: process.pid } }, pino.destination({ fd: 2, sync: true }));
  return {
    debug: (message, fields) => logger.debug(fields ?? {}, message),
    info: (message, fields) => logger.info(fields ?? {}, message),
    warn: (message, fields) => logger.warn(fields ?? {}, message),
    error: (message, fields) => logger.error(fields ?? {}, message),
  };
}
