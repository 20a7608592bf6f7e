/**
 * The array literals the batched lease writes bind (array-params.ts) read back from a real
 * PostgreSQL exactly as the JavaScript arrays they were built from: lease owners are free text
 * (a worker id is the caller's), so quotes, backslashes, commas, braces, whitespace, the word NULL
 * and non-ASCII text must survive, and a null must stay a null.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bigintArrayParam, intArrayParam, textArrayParam } from '../../src/store/postgres/array-params.js';
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

  it('refuses a token that is not an integer instead of sending it', () => {
    expect(() => intArrayParam([1, 2.5])).toThrow(/2.5 is not an integer/);
    expect(() => intArrayParam([Number.NaN])).toThrow(/NaN is not an integer/);
  });
});
