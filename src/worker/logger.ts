/**
 * The logging seam. Docket never depends on a logging library: callers inject anything with these
 * four methods (pino, console, their own), and the default says nothing.
 */

/** Structured context attached to one log line. */
export type LogFields = Record<string, unknown>;

/** What Docket logs through; `pino` and `console` both fit. */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

const ignore = (): void => {};

/** A logger that discards everything: the default, so a library stays quiet unless asked. */
export const silentLogger: Logger = Object.freeze({ debug: ignore, info: ignore, warn: ignore, error: ignore });

/** A logger that adds `fields` to every line it writes through `logger`. */
export function childLogger(logger: Logger, fields: LogFields): Logger {
  if (logger === silentLogger) return silentLogger;
  const merge = (extra?: LogFields): LogFields => (extra ? { ...fields, ...extra } : fields);
  return {
    debug: (message, extra) => logger.debug(message, merge(extra)),
    info: (message, extra) => logger.info(message, merge(extra)),
    warn: (message, extra) => logger.warn(message, merge(extra)),
    error: (message, extra) => logger.error(message, merge(extra)),
  };
}

/** Turns anything thrown into loggable fields without throwing itself. */
export function errorFields(error: unknown): LogFields {
  if (error instanceof Error) return { error: error.message, errorName: error.name, stack: error.stack };
  return { error: String(error) };
}
