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

/** The server's pino logger as Docket's Logger: the seam takes pino's (fields, message) order, so it fits as is. */
export function docketLogger(logger: ServerLogger): Logger {
  return logger;
}
