/**
 * The logging seam. Docket never depends on a logging library: callers inject anything with these
 * four methods, and the default says nothing. The argument order is pino's (fields first, then
 * the message), so a pino logger (or a pino child) is passed as it is and keeps every field.
 * `console` also fits (it prints the fields, then the message).
 */

/** Structured context attached to one log line. */
export type LogFields = Record<string, unknown>;

/** What Docket logs through: pino's `(fields, message)` order, so a pino instance fits directly. */
export interface Logger {
  debug(fields: LogFields, message: string): void;
  info(fields: LogFields, message: string): void;
  warn(fields: LogFields, message: string): void;
  error(fields: LogFields, message: string): void;
}

const ignore = (): void => {};

/** A logger that discards everything: the default, so a library stays quiet unless asked. */
export const silentLogger: Logger = Object.freeze({ debug: ignore, info: ignore, warn: ignore, error: ignore });

/** A logger that adds `fields` to every line it writes through `logger` (the line's own fields win). */
export function childLogger(logger: Logger, fields: LogFields): Logger {
  if (logger === silentLogger) return silentLogger;
  const merge = (extra: LogFields | undefined): LogFields => (extra ? { ...fields, ...extra } : fields);
  return {
    debug: (extra, message) => logger.debug(merge(extra), message),
    info: (extra, message) => logger.info(merge(extra), message),
    warn: (extra, message) => logger.warn(merge(extra), message),
    error: (extra, message) => logger.error(merge(extra), message),
  };
}

/** Turns anything thrown into loggable fields without throwing itself. */
export function errorFields(error: unknown): LogFields {
  if (error instanceof Error) return { error: error.message, errorName: error.name, stack: error.stack };
  return { error: String(error) };
}
