/**
 * The array literals the batched lease writes and the submit inserts bind (array-params.ts) read
 * back from a real PostgreSQL exactly as the JavaScript arrays they were built from: lease owners,
 * kinds, queues and idempotency keys are free text
 * (a worker id is the caller's), so quotes, backslashes, commas, braces, whitespace, the word NULL
 * and non-ASCII text must survive, and a null must stay a null.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bigintArrayParam,
  floatArrayParam,
  intArrayParam,
  sharedOrEach,
  textArrayParam,
  timestamptzArrayParam,
} from '../../src/store/postgres/array-params.js';
import { POSTGRES_URL } from '../support/stores.js';

let client: pg.Client;

beforeAll(async () => {
  client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
});

afterAll(async () => {
  await client.end();
});

describe('PostgreSQL array parameters', () => {
  it('reads text arrays back element for element, nulls included', async () => {
    const owners = [
      'host-1234-abcdef',
      'with "quotes"',
      'back\\slash and \\"both\\"',
      'comma, {braces} and ;',
      '  padded  ',
      'NULL',
      '',
      'Zoë 工作者 🚀',
      null,
      'tab\tand\nnewline',
    ];
    const { rows } = await client.query<{ values: (string | null)[] }>('SELECT $1::text[] AS values', [
      textArrayParam(owners),
    ]);
    expect(rows[0]!.values).toEqual(owners);
  });

  it('reads bigint and int arrays back, empty ones included', async () => {
    const ids = ['1', '9007199254740993', '9223372036854775807'];
    const { rows } = await client.query<{ ids: string[]; tokens: number[]; none: string[]; no_text: string[] }>(
      'SELECT $1::bigint[]::text[] AS ids, $2::int[] AS tokens, $3::bigint[]::text[] AS none, $4::text[] AS no_text',
      [bigintArrayParam(ids), intArrayParam([0, 7, 2147483647]), bigintArrayParam([]), textArrayParam([])],
    );
    expect(rows[0]).toEqual({ ids, tokens: [0, 7, 2147483647], none: [], no_text: [] });
  });

  it("reads nullable integer arrays back (a submit's timeouts), bigints beyond int range included", async () => {
    const timeouts = [null, 0, 1500, null, 2147483647];
    const delays = [0, 3_155_760_000_000, 1];
    const { rows } = await client.query<{ timeouts: (number | null)[]; delays: string[] }>(
      'SELECT $1::int[] AS timeouts, $2::bigint[]::text[] AS delays',
      [intArrayParam(timeouts), intArrayParam(delays)],
    );
    expect(rows[0]).toEqual({ timeouts, delays: delays.map(String) });
  });

  it("reads double precision arrays back exactly (a failure batch's delays), nulls and extremes included", async () => {
    const delays = [null, 0, 1.5, 3_600_000, 1e300, Number.MAX_VALUE, 5e-324, null];
    const { rows } = await client.query<{ delays: (number | null)[] }>('SELECT $1::double precision[] AS delays', [
      floatArrayParam(delays),
    ]);
    expect(rows[0]!.delays).toEqual(delays);
  });

  it('reads timestamptz arrays back to the millisecond, whatever the session time zone, nulls included', async () => {
    const instants = [
      new Date('1970-01-01T00:00:00.000Z'),
      new Date('2026-12-02T17:05:09.123Z'),
      null,
      new Date('2024-02-29T23:59:59.999Z'),
      new Date('9999-12-31T23:59:59.999Z'),
      new Date('0001-01-01T00:00:00.000Z'),
    ];
    await client.query("SET TIME ZONE 'America/St_Johns'");
    try {
      const { rows } = await client.query<{ ms: (string | null)[] }>(
        'SELECT array_agg((extract(epoch FROM t) * 1000)::bigint::text ORDER BY n) AS ms FROM unnest($1::timestamptz[]) WITH ORDINALITY AS u(t, n)',
        [timestamptzArrayParam(instants)],
      );
      expect(rows[0]!.ms).toEqual(instants.map((instant) => (instant === null ? null : String(instant.getTime()))));
    } finally {
      await client.query('RESET TIME ZONE');
    }
  });

  it('refuses a number that is not an integer, and an instant PostgreSQL would misread, instead of sending it', () => {
    expect(() => intArrayParam([1, 2.5])).toThrow(/2.5 is not an integer/);
    expect(() => intArrayParam([Number.NaN])).toThrow(/NaN is not an integer/);
    expect(() => floatArrayParam([1, Number.POSITIVE_INFINITY])).toThrow(/Infinity is not a finite number/);
    expect(() => floatArrayParam([Number.NaN])).toThrow(/NaN is not a finite number/);
    expect(() => timestamptzArrayParam([new Date(Number.NaN)])).toThrow(/outside years 1 to 9999/);
    expect(() => timestamptzArrayParam([new Date('+010000-01-01T00:00:00.000Z')])).toThrow(/outside years 1 to 9999/);
    expect(() => timestamptzArrayParam([new Date('0000-12-31T23:59:59.999Z')])).toThrow(/outside years 1 to 9999/);
  });

  it('sends a column every element shares as one element, and any other column whole', () => {
    expect(sharedOrEach(['a', 'a', 'a'])).toEqual(['a']);
    expect(sharedOrEach([null, null])).toEqual([null]);
    // A lone difference anywhere, a null among values included, keeps every element.
    expect(sharedOrEach(['a', 'a', 'b'])).toEqual(['a', 'a', 'b']);
    expect(sharedOrEach([7, null, 7])).toEqual([7, null, 7]);
    expect(sharedOrEach([null, 7])).toEqual([null, 7]);
    expect(sharedOrEach([])).toEqual([]);
    expect(sharedOrEach([5])).toEqual([5]);
    // Compared by key: equal instants in distinct Dates are shared.
    const instant = (date: Date | null) => date?.getTime() ?? null;
    const at = (ms: number) => new Date(ms);
    expect(sharedOrEach([at(1000), at(1000)], instant)).toEqual([at(1000)]);
    expect(sharedOrEach([at(1000), at(1001)], instant)).toHaveLength(2);
    expect(sharedOrEach([at(1000), at(1000)])).toHaveLength(2);
  });
});
