/**
 * Hot statements kept in the database as PL/pgSQL functions, so each connection parses and plans
 * them once instead of on every call (docs/decisions/0013-stored-hot-statements.md).
 *
 * Why functions: PostgreSQL parses, analyses and plans every unnamed statement anew. For the
 * claim a worker sends between its lapsed-lease searches that was about 1 ms of server CPU per
 * call, more than the claim itself when it leases a few jobs; at 1,000 single submits a second
 * (a submit, a claim and a completion per job) parse and plan alone kept a 2-core server busy.
 * Named prepared statements would save the same, but they live in one server session, which a
 * transaction pooler hands to other clients (decision 0007). A PL/pgSQL function is a schema
 * object: whichever session runs it caches its plan, so it is as pooler-safe as a table.
 *
 * How the plan is kept honest: every function runs with `plan_cache_mode = force_generic_plan`
 * (one plan per session, made at its first call, never re-made per parameter), with sequential
 * and bitmap scans, hash and merge joins and JIT compilation disabled, and the claims with sorts
 * disabled too (decision 0027). A generic plan made while the jobs table was empty must not turn
 * into a sequential scan of a million rows later, and every hot statement is designed for plain
 * index scans anyway (decisions 0006, 0010): a bitmap scan never marks a dead index entry, a
 * sequential scan reads the whole queue. test/store/postgres-stored-statements.test.ts reads the
 * plans the functions really use (auto_explain) on an empty table and on a large one.
 *
 * Versioning: a function's name carries a hash of its whole definition, so a changed statement is
 * a new function; processes of the previous release keep calling theirs during a rolling deploy.
 * The store creates missing ones when it opens, in the migration transaction; `docket migrate
 * --sql` prints them after the pending migrations.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';

/** What a hot statement is: its SQL (with `$n` parameters) and the types around it. */
export type StoredStatementSpec = {
  /** The function name's readable part, e.g. `claim_pending`. */
  prefix: string;
  /** The SQL type of each `$n`, in order; the statement's own casts must agree. */
  parameterTypes: readonly string[];
  /** The result columns, `name type, …`, exactly as the statement answers them. */
  returns: string;
  /**
   * Planner settings of this statement beyond {@link PLAN_SETTINGS}, `name = value` each (the
   * claims disable sorts they can avoid: decision 0027).
   */
  planSettings?: readonly string[];
} & (
  | {
      /** One SQL statement, answering rows of `returns`. */
      sql: string;
    }
  | {
      /**
       * A whole PL/pgSQL body (`DECLARE … BEGIN … END`, parameters as `$n`), for work one
       * statement cannot express; it answers rows of `returns` with RETURN NEXT.
       */
      plpgsql: string;
    }
);

/** A hot statement as a function: the SQL that calls it and the SQL that creates it. */
export interface StoredStatement {
  /** The function's unquoted name, unique to this definition. */
  readonly functionName: string;
  /** `SELECT * FROM schema.function($1, …)`, with the statement's parameters. */
  readonly callSql: string;
  /** The CREATE OR REPLACE FUNCTION statement. */
  readonly createSql: string;
}

/**
 * The planner settings every stored statement is planned and run under; see the file header. JIT
 * compilation is off: it pays off for long analytical queries, never for these millisecond
 * statements, yet a disabled path's cost estimate (PostgreSQL adds 10^10 per disabled node it
 * cannot avoid) would cross `jit_above_cost` and compile every call (800 ms measured for a claim).
 * Also what a transaction sets with SET LOCAL to plan a statement sent as SQL the same way.
 */
export const PLANNER_SETTINGS = [
  'enable_seqscan = off',
  'enable_bitmapscan = off',
  'enable_hashjoin = off',
  'enable_mergejoin = off',
  'jit = off',
];

/** A function's settings: one generic plan per session, made under {@link PLANNER_SETTINGS}. */
const PLAN_SETTINGS = ['plan_cache_mode = force_generic_plan', ...PLANNER_SETTINGS];

/** Builds the function for one hot statement in `quotedSchema` (already quoted). */
export function storedStatement(quotedSchema: string, spec: StoredStatementSpec): StoredStatement {
  const signature = spec.parameterTypes.join(', ');
  // `#variable_conflict use_column`: the result columns are also PL/pgSQL variables; where a name
  // is both, the statement means the table's column, as it does when sent on its own.
  const body =
    'sql' in spec
      ? `
#variable_conflict use_column
BEGIN
  RETURN QUERY ${spec.sql.trim()};
END`
      : `
#variable_conflict use_column
${spec.plpgsql.trim()}`;
  const settings = [...PLAN_SETTINGS, ...(spec.planSettings ?? [])].map((setting) => `SET ${setting}`).join(' ');
  const definition = `(${signature}) RETURNS TABLE (${spec.returns}) LANGUAGE plpgsql VOLATILE ${settings} AS $docket_stored$${body}
$docket_stored$`;
  const hash = createHash('sha256').update(quotedSchema).update(definition).digest('hex').slice(0, 12);
  const functionName = `${spec.prefix}_${hash}`;
  const qualified = `${quotedSchema}."${functionName}"`;
  const placeholders = spec.parameterTypes.map((_, index) => `$${index + 1}`).join(', ');
  return {
    functionName,
    callSql: `SELECT * FROM ${qualified}(${placeholders})`,
    createSql: `CREATE OR REPLACE FUNCTION ${qualified}${definition}`,
  };
}

/** The stored statements `schemaName` lacks (by function name), in the order given. */
export async function missingStoredStatements(
  client: pg.ClientBase,
  schemaName: string,
  statements: readonly StoredStatement[],
): Promise<StoredStatement[]> {
  if (statements.length === 0) return [];
  const existing = await client.query<{ proname: string }>(
    `SELECT p.proname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = $1 AND p.proname = ANY($2::text[])`,
    [schemaName, statements.map((statement) => statement.functionName)],
  );
  const present = new Set(existing.rows.map((row) => row.proname));
  return statements.filter((statement) => !present.has(statement.functionName));
}

/**
 * Creates the stored statements `schemaName` lacks. Run inside the migration transaction, under
 * its advisory lock, so concurrent openers do not race on the same CREATE.
 */
export async function createMissingStoredStatements(
  client: pg.ClientBase,
  schemaName: string,
  statements: readonly StoredStatement[],
): Promise<void> {
  for (const statement of await missingStoredStatements(client, schemaName, statements)) {
    await client.query(statement.createSql);
  }
}
