/**
 * Records the text of every statement a PostgresStore sends on its pool (statements inside its
 * own transactions go on checked-out clients and are not seen), so a test can count which path a
 * call took: the one-statement claim, the plain stored insert, and so on.
 */
import type pg from 'pg';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';

/** Starts recording `store`'s pool statements; the returned list grows as they are sent. */
export function recordPoolStatements(store: PostgresStore): string[] {
  const sent: string[] = [];
  const pool = (store as unknown as { pool: pg.Pool }).pool;
  const original = pool.query.bind(pool);
  (pool as unknown as { query: unknown }).query = (...args: Parameters<pg.Pool['query']>) => {
    sent.push(typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text);
    return (original as (...a: unknown[]) => unknown)(...args);
  };
  return sent;
}
