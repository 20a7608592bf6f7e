/**
 * Exit codes and the error type the CLI's commands throw. Scripts branch on the exit code, so the
 * mapping is fixed: 0 success, 1 the operation failed or found nothing, 2 bad usage or input.
 */
import { DocketError } from '../job/errors.js';

/** The command did what it was asked. */
export const EXIT_OK = 0;
/** The operation failed or its target was not found (unknown job id, stale state, database down). */
export const EXIT_FAILED = 1;
/** Bad flags, arguments or input values; nothing was done. */
export const EXIT_USAGE = 2;

/** An error whose message is shown as is on stderr and whose exit code the process returns. */
export class CliError extends DocketError {
  /** One of {@link EXIT_FAILED} or {@link EXIT_USAGE}. */
  readonly exitCode: number;

  constructor(message: string, exitCode: number = EXIT_FAILED) {
    super(exitCode === EXIT_USAGE ? 'cli_usage' : 'cli_failed', message);
    this.exitCode = exitCode;
  }
}

/** A {@link CliError} for bad usage (exit 2). */
export function usageError(message: string): CliError {
  return new CliError(message, EXIT_USAGE);
}

/** A {@link CliError} for a failed operation or a missing target (exit 1). */
export function failure(message: string): CliError {
  return new CliError(message, EXIT_FAILED);
}
