/**
 * Structured JSON logs for the server (pino). Request lines carry method, route pattern, status,
 * duration and the token's *name*; never headers, query strings or bodies, because those carry
 * bearer tokens, receivers' credentials and job payloads. The redaction list is a second line of
 * defence for anything that still reaches a log call with such a field.
 */
import { pino } from 'pino';
import type { Logger } from '../worker/logger.js';

/** Field paths censored in every log line. */
export const REDACTED_PATHS = [
  'authorization',
  '*.authorization',
  'headers',
  '*.headers',
  'token',
  '*.token',
  'tokens',
  'secret',
  '*.secret',
  'webhookSecret',
  'payload',
  '*.payload',
  'body',
  '*.body',
];

/** The pino logger type the server uses. */
export type ServerLogger = pino.Logger;

/** A pino logger writing JSON lines to `destination` (stdout by default) at `level`. */
export function createServerLogger(level: string, destination?: pino.DestinationStream): ServerLogger {
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'docket' },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** Adapts pino to Docket's Logger seam (message first, fields second). */
export function docketLogger(logger: ServerLogger): Logger {
  return {
    debug: (message, fields) => logger.debug(fields ?? {}, message),
    info: (message, fields) => logger.info(fields ?? {}, message),
    warn: (message, fields) => logger.warn(fields ?? {}, message),
    error: (message, fields) => logger.error(fields ?? {}, message),
  };
}
