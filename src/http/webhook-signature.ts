/**
 * Webhook request signing. Each request carries
 *   Docket-Delivery-Id: <job id>            (the same for every attempt of one job)
 *   Docket-Timestamp: <unix seconds>        (taken at each attempt)
 *   Docket-Signature: v1=<hex HMAC-SHA256(secret, "<delivery id>.<timestamp>.<raw body>")>
 * A receiver recomputes the HMAC over the raw body bytes, compares in constant time, and refuses
 * a timestamp outside its replay window (default 5 minutes), so a captured request cannot be
 * replayed later. Within the window it refuses a delivery id it has already accepted: the id is
 * signed, so an attacker cannot change it to slip a replay past that check, and the same check
 * makes a redelivery (Docket is at-least-once) harmless.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header carrying the signing time, in unix seconds. */
export const TIMESTAMP_HEADER = 'docket-timestamp';
/** Header carrying `v1=<hex>` signatures (several, comma-separated, while a secret is rotated). */
export const SIGNATURE_HEADER = 'docket-signature';
/** Header carrying the delivery id (the job id), stable across retries of one job. */
export const DELIVERY_HEADER = 'docket-delivery-id';
/** Default replay window on either side of the receiver's clock, in seconds. */
export const DEFAULT_TOLERANCE_S = 300;

/** The hex HMAC-SHA256 of `"<deliveryId>.<timestampS>.<body>"`. */
export function computeSignature(
  secret: string,
  deliveryId: string,
  timestampS: number,
  body: string | Buffer,
): string {
  return createHmac('sha256', secret).update(`${deliveryId}.${timestampS}.`).update(body).digest('hex');
}

/** The signing headers for one request body. */
export function signWebhook(params: {
  secret: string;
  deliveryId: string;
  body: string | Buffer;
  timestampS: number;
}): {
  [DELIVERY_HEADER]: string;
  [TIMESTAMP_HEADER]: string;
  [SIGNATURE_HEADER]: string;
} {
  return {
    [DELIVERY_HEADER]: params.deliveryId,
    [TIMESTAMP_HEADER]: String(params.timestampS),
    [SIGNATURE_HEADER]: `v1=${computeSignature(params.secret, params.deliveryId, params.timestampS, params.body)}`,
  };
}

/** The outcome of {@link verifyWebhookSignature}. */
export type VerifyResult = { ok: true } | { ok: false; reason: 'missing' | 'bad_signature' | 'expired' };

/** Verifies a received request: signature over the raw body, and timestamp inside the replay window. */
export function verifyWebhookSignature(params: {
  secret: string;
  body: string | Buffer;
  deliveryId: string | null | undefined;
  timestamp: string | null | undefined;
  signature: string | null | undefined;
  toleranceS?: number;
  nowS?: number;
}): VerifyResult {
  const { deliveryId, timestamp, signature } = params;
  if (!deliveryId || !timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: 'missing' };
  const timestampS = Number(timestamp);
  const nowS = params.nowS ?? Math.floor(Date.now() / 1000);
  const expected = Buffer.from(computeSignature(params.secret, deliveryId, timestampS, params.body), 'hex');
  const matched = signature
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.startsWith('v1='))
    .some((part) => {
      const given = Buffer.from(part.slice(3), 'hex');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
  if (!matched) return { ok: false, reason: 'bad_signature' };
  if (Math.abs(nowS - timestampS) > (params.toleranceS ?? DEFAULT_TOLERANCE_S)) return { ok: false, reason: 'expired' };
  return { ok: true };
}
