/**
 * Payload checks: plain JSON that every store can keep (no NUL, no lone surrogate, finite
 * numbers, bounded depth and size), checked without recursion before anything is serialised.
 */
import { ValidationError } from './errors.js';

/** Largest payload accepted, measured as UTF-8 bytes of its JSON text (256 KiB). */
export const MAX_PAYLOAD_BYTES = 256 * 1024;
/** Deepest nesting of arrays and objects a payload may have (checked without recursion). */
export const MAX_PAYLOAD_DEPTH = 64;

/** Finds a NUL or an unpaired UTF-16 surrogate: PostgreSQL cannot store either in text or jsonb. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding the NUL is the point.
const UNSTORABLE_CHARACTER = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why `value` cannot be stored as text by every store, or null when it can. */
export function unstorableReason(value: string): string | null {
  const match = UNSTORABLE_CHARACTER.exec(value);
  if (!match) return null;
  return match[0] === '\u0000'
    ? `contains a NUL character (\\u0000) at index ${match.index}, which cannot be stored`
    : `contains an unpaired UTF-16 surrogate at index ${match.index}, which is not valid Unicode text`;
}

/** Every NUL and unpaired surrogate, for {@link replaceUnstorableCharacters}. */
const UNSTORABLE_CHARACTERS = new RegExp(UNSTORABLE_CHARACTER.source, 'g');

/**
 * `value` with each NUL and unpaired surrogate replaced by U+FFFD: for text Docket records rather
 * than accepts (a handler's thrown message and stack), which must be stored whatever it holds.
 * A downstream's binary body quoted in an error message is ordinary, and refusing it would leave
 * the failed attempt unrecorded, its lease to lapse and the job to run again.
 */
export function replaceUnstorableCharacters(value: string): string {
  return UNSTORABLE_CHARACTER.test(value) ? value.replace(UNSTORABLE_CHARACTERS, '\uFFFD') : value;
}

/**
 * Refuses a string no store can keep as text: a NUL, or a lone surrogate. SQLite would store
 * both and PostgreSQL refuses both, so they are refused up front on every store alike.
 */
export function validateStorableText(field: string, value: string): string {
  const reason = unstorableReason(value);
  if (reason !== null) throw new ValidationError(field, reason);
  return value;
}

interface JsonFrame {
  value: unknown;
  depth: number;
  parent: JsonFrame | null;
  key: string | number | null;
}

function framePath(field: string, frame: JsonFrame): string {
  const parts: string[] = [];
  for (let at: JsonFrame | null = frame; at?.key != null; at = at.parent) {
    parts.push(`.${at.key}`);
  }
  return field + parts.reverse().join('');
}

/**
 * Checks that `value` is plain JSON every store can keep, without recursion (so a body nested
 * 100 000 deep costs a loop, never the stack): at most {@link MAX_PAYLOAD_DEPTH} levels of
 * arrays and objects, no more than {@link MAX_PAYLOAD_BYTES} of JSON (estimated from below, so
 * a huge value is refused before it is serialised), finite numbers only, no BigInt, function,
 * symbol or class instance (a Date is a string), and only storable strings, keys included.
 */
export function checkJsonValue(field: string, value: unknown, maxBytes = MAX_PAYLOAD_BYTES): void {
  const stack: JsonFrame[] = [{ value, depth: 0, parent: null, key: null }];
  // A lower bound of the UTF-8 JSON size: UTF-8 never takes fewer bytes than UTF-16 code units.
  let bytes = 0;
  const tooLarge = () =>
    new ValidationError(field, `is over the ${maxBytes}-byte limit of JSON (counted before serialising)`);
  while (stack.length > 0) {
    const frame = stack.pop() as JsonFrame;
    const current = frame.value;
    if (current === null || current === undefined || typeof current === 'boolean') {
      bytes += 4;
    } else if (typeof current === 'number') {
      if (!Number.isFinite(current)) {
        throw new ValidationError(framePath(field, frame), `${current} is not JSON (it would become null)`);
      }
      bytes += 1;
    } else if (typeof current === 'string') {
      const reason = unstorableReason(current);
      if (reason !== null) throw new ValidationError(framePath(field, frame), reason);
      bytes += current.length + 2;
    } else if (typeof current === 'bigint') {
      throw new ValidationError(framePath(field, frame), 'a BigInt is not JSON');
    } else if (typeof current === 'function' || typeof current === 'symbol') {
      throw new ValidationError(framePath(field, frame), `a ${typeof current} is not JSON`);
    } else if (current instanceof Date) {
      bytes += 26;
    } else {
      const depth = frame.depth + 1;
      if (depth > MAX_PAYLOAD_DEPTH) {
        // Named by its root: a path 64 levels long would say less than the limit does.
        throw new ValidationError(field, `nests arrays and objects more than ${MAX_PAYLOAD_DEPTH} levels deep`);
      }
      if (Array.isArray(current)) {
        bytes += 2 + current.length;
        if (bytes > maxBytes) throw tooLarge();
        for (let i = current.length - 1; i >= 0; i--) {
          stack.push({ value: current[i], depth, parent: frame, key: i });
        }
      } else {
        const prototype = Object.getPrototypeOf(current);
        if (prototype !== Object.prototype && prototype !== null) {
          const name = (current as { constructor?: { name?: string } }).constructor?.name ?? 'object';
          throw new ValidationError(framePath(field, frame), `a ${name} is not plain JSON (use objects and arrays)`);
        }
        const keys = Object.keys(current);
        bytes += 2 + keys.length * 4;
        if (bytes > maxBytes) throw tooLarge();
        for (let i = keys.length - 1; i >= 0; i--) {
          const key = keys[i] as string;
          const reason = unstorableReason(key);
          if (reason !== null) throw new ValidationError(framePath(field, frame), `has a key that ${reason}`);
          bytes += key.length;
          stack.push({ value: (current as Record<string, unknown>)[key], depth, parent: frame, key });
        }
      }
    }
    if (bytes > maxBytes) throw tooLarge();
  }
}

/**
 * Serialises a payload, refusing what JSON cannot carry faithfully, what no store can keep, and
 * what is too large or too deep; the shape is checked (without recursion) before serialising.
 */
export function serializePayload(field: string, payload: unknown): string {
  checkJsonValue(field, payload);
  const text = JSON.stringify(payload === undefined ? null : payload);
  if (text === undefined) throw new ValidationError(field, 'is not JSON-serialisable');
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_PAYLOAD_BYTES) {
    throw new ValidationError(field, `is ${bytes} bytes of JSON, over the ${MAX_PAYLOAD_BYTES}-byte limit`);
  }
  return text;
}
