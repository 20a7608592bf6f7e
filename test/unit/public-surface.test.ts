/**
 * The package entry point exports what applications use and none of Docket's own helpers, so an
 * internal can be renamed or reshaped without a breaking release (issue 16, "stable public surface").
 */
import { describe, expect, it } from 'vitest';
import * as docket from '../../src/index.js';

/** Helpers only Docket itself calls; tests import them from their own modules. */
const INTERNALS = [
  'normalizeSubmit',
  'jobSpecForRun',
  'normalizeScheduleSpec',
  'planScheduleRuns',
  'resolveClaimKinds',
  'isHandled',
  'servesJob',
  'unhandledCounts',
  'normalizeRemoteRegistration',
  'REGISTRY_REFRESHES_PER_TTL',
  'backoffBand',
  'retryDelayMs',
  'decideAfterFailure',
  'parseStoreUrl',
];

describe('the public surface (src/index.ts)', () => {
  it('exports no internal helper', () => {
    expect(Object.keys(docket).filter((name) => INTERNALS.includes(name))).toEqual([]);
  });

  it('exports what the guides import', () => {
    // docs/library.md and docs/http-api.md import these from 'docket'.
    for (const name of [
      'Docket',
      'defineJob',
      'DoNotRetryError',
      'RetryAfterError',
      'SnoozeError',
      'StaleLeaseError',
      'ValidationError',
      'verifyWebhookSignature',
      'openStore',
    ]) {
      expect(docket, name).toHaveProperty(name);
    }
  });
});
