/**
 * `docket migrate`: brings a store's schema up to date, for operators who run migrations as their
 * own deploy step rather than letting the first worker do it. `--dry-run` lists what would be
 * applied and `--sql` prints it as one SQL script (to review, or to run with psql / sqlite3);
 * both only read the store and create nothing, not even a missing SQLite file or schema.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { inspectStore, redactStoreUrl, type StoreInspection } from '../../store/open-store.js';
import { failure } from '../cli-error.js';
import { databaseOption, jsonOption, openTarget, resolveStoreTarget } from '../open-cli-docket.js';
import { printJson, printLine } from '../output.js';

/** Builds the `migrate` command. */
export function migrateCommand() {
  return new Command('migrate')
    .description("apply the store's pending schema migrations (creating the store if needed), or show them")
    .addOption(new Option('--dry-run', 'list the pending migrations; change nothing').conflicts('sql'))
    .addOption(new Option('--sql', 'print the pending migrations as one SQL script; change nothing'))
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (_options, self) => {
      const flags = self.opts() as Record<string, unknown>;
      const resolved = resolveStoreTarget(flags);
      if (resolved.url === undefined) {
        // A sharded store: opening it migrates every shard and numbers the fresh ones.
        if (flags.dryRun || flags.sql)
          throw failure('--dry-run and --sql read one store: give --db with one shard URL');
        const docket = await openTarget(resolved, 'create');
        await docket.close();
        const count = resolved.options.shards?.length ?? 0;
        if (flags.json) printJson({ shards: count, migrated: true });
        else printLine(`${count} shard${count === 1 ? '' : 's'} up to date`);
        return;
      }
      const target = { ...resolved, url: resolved.url };
      const shown = redactStoreUrl(target.url);
      let before: StoreInspection;
      try {
        before = await inspectStore(target.url, {
          schema: target.options.schema,
          connectTimeoutMs: target.options.connectTimeoutMs,
        });
      } catch (error) {
        throw failure(`cannot open the store ${shown}: ${(error as Error).message}`);
      }
      if (before.exists && !before.hasDocketSchema && !target.url.startsWith('postgres')) {
        // A SQLite file that is not Docket's: migrating would add tables to someone else's database.
        throw failure(`${shown} exists but has no Docket schema (no docket_migrations table); refusing to add one`);
      }
      const pending = before.pending.map(({ version, name }) => ({ version, name }));
      if (flags.sql) {
        printLine(migrationScript(before, target.url.startsWith('sqlite')));
        return;
      }
      if (flags.dryRun) {
        const functions = before.missingFunctions.map((fn) => fn.name);
        if (flags.json) printJson({ applied: before.appliedVersions, pending, functions });
        else if (pending.length === 0 && functions.length === 0)
          printLine(`${shown} is up to date (${describeVersions(before.appliedVersions)})`);
        else {
          if (pending.length > 0) {
            printLine(
              `${shown}: ${pending.length} pending migration${pending.length === 1 ? '' : 's'} (nothing applied):`,
            );
            for (const migration of pending) printLine(`  ${migration.version}  ${migration.name}`);
          }
          if (functions.length > 0) {
            printLine(
              `${shown}: ${functions.length} statement function${functions.length === 1 ? '' : 's'} to create:`,
            );
            for (const name of functions) printLine(`  ${name}`);
          }
        }
        return;
      }
      const docket = await openTarget(target, 'create');
      await docket.close();
      const after = await inspectStore(target.url, {
        schema: target.options.schema,
        connectTimeoutMs: target.options.connectTimeoutMs,
      });
      const applied = after.appliedVersions.filter((version) => !before.appliedVersions.includes(version));
      if (flags.json) printJson({ applied, versions: after.appliedVersions });
      else if (applied.length === 0) printLine(`${shown} is up to date (${describeVersions(after.appliedVersions)})`);
      else printLine(`${shown}: applied migration${applied.length === 1 ? '' : 's'} ${applied.join(', ')}`);
    });
}

function describeVersions(versions: readonly number[]): string {
  return versions.length === 0 ? 'no migrations' : `migrations ${versions.join(', ')}`;
}

/**
 * The pending migrations as one script: the migration table first, then each step in its own
 * transaction, then the statement functions the schema lacks (PostgreSQL).
 */
function migrationScript(inspection: StoreInspection, sqlite: boolean): string {
  const lines = [
    `-- Docket schema migrations pending for this store: ${inspection.pending.map((m) => m.version).join(', ') || 'none'}`,
    '-- Each runs in its own transaction and is recorded in the migration table, as docket itself applies them.',
    inspection.bootstrapSql,
  ];
  for (const migration of inspection.pending) {
    lines.push(
      '',
      `-- ${migration.version}: ${migration.name}`,
      sqlite ? 'BEGIN IMMEDIATE;' : 'BEGIN;',
      migration.sql.endsWith(';') ? migration.sql : `${migration.sql};`,
      inspection.recordSql(migration),
      'COMMIT;',
    );
  }
  if (inspection.missingFunctions.length > 0) {
    lines.push(
      '',
      '-- The functions Docket keeps its hottest statements in (docs/decisions/0013-stored-hot-statements.md).',
    );
    for (const fn of inspection.missingFunctions) lines.push(`${fn.sql};`);
  }
  return lines.join('\n');
}
