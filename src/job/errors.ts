/**
 * Errors Docket throws on purpose. Expected outcomes (a stale token, a job not found) are values,
 * never exceptions; these are for bad input and broken configuration.
 */

/** Base class for every error Docket raises deliberately, so callers can tell ours from others. */
export class DocketError extends Error {
  /** A stable machine-readable code, e.g. `invalid_input`. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Input that breaks a documented rule. `field` names the offending field (dotted path). */
export class ValidationError extends DocketError {
  readonly field: string;

  constructor(field: string, message: string) {
    super('invalid_input', `${field}: ${message}`);
    this.field = field;
  }
}

/** A configuration that cannot work safely, refused before anything starts. */
export class ConfigurationError extends DocketError {
  constructor(message: string) {
    super('invalid_configuration', message);
  }
}
