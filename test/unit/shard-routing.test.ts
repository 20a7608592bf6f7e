/**
 * The sharded store's pure parts: the id format, rendezvous hashing, claim shares, round-robin,
 * shard numbering and the shard-list check (docs/sharding.md).
 */
import { describe, expect, it } from 'vitest';
import { MAX_JOB_ID } from '../../src/job/list-params.js';
import { resolvePostgresConnectionOptions } from '../../src/store/postgres/connection-options.js';
import {
  planShardNumbers,
  SHARD_ADMIN_APPLICATION,
  type ShardLocation,
  shardLocation,
} from '../../src/store/sharded/shard-identity.js';
import { MAX_SHARD_NUMBER, SHARD_ID_SPAN, shardIdRange, shardNumberOfId } from '../../src/store/sharded/shard-ids.js';
import { RoundRobin, shardForKey, splitClaimLimit, stableHash32 } from '../../src/store/sharded/shard-routing.js';
import { checkShardUrls } from '../../src/store/sharded/sharded-store.js';

describe('shard ids', () => {
  it('name their shard by their leading digits, with every range inside the safe job-id bound', () => {
    expect(shardNumberOfId('1')).toBe(0);
    expect(shardNumberOfId(String(SHARD_ID_SPAN - 1))).toBe(0);
    expect(shardNumberOfId(String(SHARD_ID_SPAN))).toBe(1);
    expect(shardNumberOfId(String(3 * SHARD_ID_SPAN + 17))).toBe(3);
    expect(shardNumberOfId('abc')).toBeNull();
    expect(shardIdRange(0)).toEqual({ first: 1, last: SHARD_ID_SPAN - 1 });
    expect(shardIdRange(MAX_SHARD_NUMBER).last).toBeLessThanOrEqual(MAX_JOB_ID);
    expect(() => shardIdRange(MAX_SHARD_NUMBER + 1)).toThrow(RangeError);
    for (const n of [0, 1, 7, MAX_SHARD_NUMBER]) {
      const { first, last } = shardIdRange(n);
      expect([shardNumberOfId(String(first)), shardNumberOfId(String(last))]).toEqual([n, n]);
    }
  });
});

describe('rendezvous hashing', () => {
  const keys = Array.from({ length: 4000 }, (_, i) => `key-${i}`);

  it('is deterministic and ignores the order the shards are listed in', () => {
    for (const key of keys.slice(0, 200)) {
      expect(shardForKey(key, [0, 1, 2, 3])).toBe(shardForKey(key, [3, 1, 0, 2]));
      expect(stableHash32(key)).toBe(stableHash32(key));
    }
  });

  it('spreads keys evenly and, when a shard is added, moves only keys to the new shard', () => {
    const before = keys.map((key) => shardForKey(key, [0, 1, 2]));
    const after = keys.map((key) => shardForKey(key, [0, 1, 2, 3]));
    for (const shard of [0, 1, 2, 3]) {
      const share = after.filter((each) => each === shard).length / keys.length;
      expect(share).toBeGreaterThan(0.2);
      expect(share).toBeLessThan(0.3);
    }
    const moved = keys.filter((_, i) => before[i] !== after[i]);
    expect(moved.every((key) => shardForKey(key, [0, 1, 2, 3]) === 3)).toBe(true);
    expect(moved.length / keys.length).toBeLessThan(0.3);
  });
});

describe('claim shares and round-robin', () => {
  it('splits a limit evenly with at least one job per shard', () => {
    expect(splitClaimLimit(10, 3)).toEqual([4, 3, 3]);
    expect(splitClaimLimit(1, 3)).toEqual([1, 1, 1]);
    expect(splitClaimLimit(9, 3).reduce((a, b) => a + b)).toBe(9);
    expect(splitClaimLimit(5, 0)).toEqual([]);
  });

  it('starts each turn one shard further on', () => {
    const robin = new RoundRobin();
    expect([robin.order(['a', 'b', 'c']), robin.order(['a', 'b', 'c']), robin.order(['a', 'b', 'c'])]).toEqual([
      ['a', 'b', 'c'],
      ['b', 'c', 'a'],
      ['c', 'a', 'b'],
    ]);
    expect(robin.order([])).toEqual([]);
  });
});

describe('shard numbering and the shard list', () => {
  const at = (given: string): ShardLocation => shardLocation(given, 'docket', resolvePostgresConnectionOptions());
  const locations = ['postgres://a/x', 'postgres://b/x', 'postgres://c/x'].map(at);

  it('keeps numbered shards, gives a fresh one its position when free, else the lowest free number', () => {
    expect(planShardNumbers(locations, [null, null, null])).toEqual([0, 1, 2]);
    const held = { shardNumber: 0, uuid: 'u-c', draining: false };
    expect(planShardNumbers(locations, [null, null, held])).toEqual([1, 2, 0]);
    expect(
      planShardNumbers(locations, [
        { shardNumber: 2, uuid: 'u-a', draining: false },
        null,
        { shardNumber: 5, uuid: 'u-c', draining: true },
      ]),
    ).toEqual([2, 1, 5]);
  });

  it('refuses one schema listed twice and two shards with one number', () => {
    const same = { shardNumber: 1, uuid: 'u', draining: false };
    expect(() => planShardNumbers(locations.slice(0, 2), [same, same])).toThrow(/are the same database schema/);
    expect(() =>
      planShardNumbers(locations.slice(0, 2), [same, { shardNumber: 1, uuid: 'v', draining: false }]),
    ).toThrow(/both hold shard number 1/);
  });

  it('refuses an empty list, a SQLite URL, another scheme and a duplicate, naming the position', () => {
    expect(() => checkShardUrls([])).toThrow(/non-empty list/);
    expect(() => checkShardUrls('postgres://a/x')).toThrow(/non-empty list/);
    expect(() => checkShardUrls(['postgres://a/x', 'sqlite:jobs.db'])).toThrow(/shards\[1\] is a SQLite URL/);
    expect(() => checkShardUrls(['redis://a'])).toThrow(/shards\[0\] must be a postgres/);
    expect(() => checkShardUrls(['postgres://a:5432/x?schema=s', 'postgres://A/x?schema=s'])).toThrow(
      /shards\[1\] repeats shards\[0\]/,
    );
    expect(checkShardUrls(['postgres://a/x?schema=s', 'postgres://a/x?schema=t'])).toHaveLength(2);
  });
});

describe('shardLocation', () => {
  it("gives the store's own connections to a shard the store's connection options, under the admin name", () => {
    const connection = resolvePostgresConnectionOptions({ statementTimeoutMs: 1500, connectAttemptTimeoutMs: 700 });
    const location = shardLocation('postgres://h:5433/d?schema=s1', undefined, connection);
    expect(location).toMatchObject({ url: 'postgres://h:5433/d', schema: 's1' });
    // The pool's settings (postgresClientConfig, tested in postgres-connection-options.test.ts), renamed.
    expect(location.client).toMatchObject({
      connectionString: 'postgres://h:5433/d',
      application_name: SHARD_ADMIN_APPLICATION,
      connectionTimeoutMillis: 700,
      statement_timeout: 1500,
    });
  });
});
