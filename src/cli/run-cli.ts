/**
 * The `docket` program: builds the commands and turns every outcome into an exit code scripts can
 * trust (0 ok, 1 the operation failed or found nothing, 2 bad usage or input) and one clear stderr
 * message. Commander's own parse errors are printed by commander and mapped to 2.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from '@commander-js/extra-typings';
import { ConfigurationError, DocketError, ValidationError } from '../job/errors.js';
import { CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './cli-error.js';
import { DATABASE_SETTING, DOCKET_SETTINGS, STORE_SETTINGS, WORKER_SETTINGS } from './cli-settings.js';
import { deadCommand } from './commands/dead-command.js';
import { demoCommand } from './commands/demo-command.js';
import { jobsCommand } from './commands/jobs-command.js';
import { migrateCommand } from './commands/migrate-command.js';
import { queuesCommand } from './commands/queues-command.js';
import { schedulesCommand } from './commands/schedules-command.js';
import { serveCommand } from './commands/serve-command.js';
import { shardsCommand } from './commands/shards-command.js';
import { statsCommand } from './commands/stats-command.js';
import { submitCommand } from './commands/submit-command.js';
import { workCommand } from './commands/work-command.js';
import { workersCommand } from './commands/workers-command.js';
import { addStoreOptions } from './open-cli-docket.js';
import { printError } from './output.js';

/** Docket's fields as the CLI spells them, so a validation error names the flag the user typed. */
const FLAG_FOR_FIELD: Record<string, string> = {
  url: '--db',
  kind: '--kind',
  payload: '--payload',
  runAt: '--run-at',
  delayMs: '--delay-ms',
  queue: '--queue',
  queues: '--queues',
  priority: '--priority',
  maxAttempts: '--max-attempts',
  idempotencyKey: '--idempotency-key',
  timeoutMs: '--timeout-ms',
  jitterMs: '--jitter-ms',
  concurrency: '--concurrency',
  leaseMs: '--lease-ms',
  heartbeatIntervalMs: '--heartbeat-interval-ms',
  pollIntervalMs: '--poll-interval-ms',
  shutdownGraceMs: '--shutdown-grace-ms',
  schema: '--schema',
  busyTimeoutMs: '--busy-timeout-ms',
  limit: '--limit',
  afterId: '--after',
  states: '--state',
  id: '<id>',
  parkedBefore: '--before',
  ids: '--id',
  cron: '--cron',
  timeZone: '--time-zone',
  jitterMode: '--jitter-mode',
  paused: '--paused',
  name: '<name>',
  catchUpWindowMs: '--catch-up-window-ms',
  maxCatchUpRuns: '--max-catch-up-runs',
};

// Every Docket, store and worker setting by its option name, so an error from the library names the flag.
for (const setting of [DATABASE_SETTING, ...STORE_SETTINGS, ...DOCKET_SETTINGS, ...WORKER_SETTINGS]) {
  FLAG_FOR_FIELD[setting.key] ??= setting.flag;
}

/** Builds the program; commands throw, {@link runCli} maps. */
export function createProgram(): Command {
  const program = new Command('docket')
    .description('Docket: a durable job scheduler with leases, fencing tokens, backoff and a dead-letter table')
    .version(packageVersion(), '-V, --version', 'print the version')
    .showHelpAfterError('(run with --help for usage)')
    // Commander would call process.exit itself; throwing lets runCli choose the exit code (2 for usage).
    .exitOverride();
  program.addCommand(demoCommand());
  program.addCommand(workCommand());
  program.addCommand(submitCommand());
  program.addCommand(jobsCommand());
  program.addCommand(deadCommand());
  program.addCommand(statsCommand());
  program.addCommand(schedulesCommand());
  program.addCommand(queuesCommand());
  program.addCommand(shardsCommand());
  program.addCommand(workersCommand());
  program.addCommand(migrateCommand());
  program.addCommand(serveCommand());
  // Every command that took --db also gets --schema, --connect-timeout-ms, the other store options and --config.
  addStoreOptions(program);
  // Subcommands added with addCommand do not inherit exitOverride, so set it on every one.
  const override = (command: Command) => {
    command.exitOverride();
    for (const sub of command.commands) override(sub as Command);
  };
  override(program);
  return program;
}

/** The package's version; package.json sits two levels up from both src/cli/ and dist/cli/. */
function packageVersion(): string {
  try {
    const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
    return (JSON.parse(text) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Runs the CLI on `argv` (as in process.argv) and returns the exit code; never throws. */
export async function runCli(argv: readonly string[]): Promise<number> {
  try {
    await createProgram().parseAsync([...argv]);
    return EXIT_OK;
  } catch (error) {
    return exitCodeFor(error);
  }
}

/** Prints the error the way its kind deserves and picks the exit code. */
function exitCodeFor(error: unknown): number {
  if (error instanceof CommanderError) {
    // Commander has already printed its message (or the help text).
    return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  }
  if (error instanceof CliError) {
    printError(`error: ${error.message}`);
    return error.exitCode;
  }
  if (error instanceof ValidationError) {
    // `runAt` → --run-at; a nested field (`job.priority`, `misfire.catchUpWindowMs`) by its last part.
    const parts = error.field.split(/[.[\]]/).filter((part) => part !== '' && !/^\d+$/.test(part));
    const flag = FLAG_FOR_FIELD[parts[0] ?? ''] ?? FLAG_FOR_FIELD[parts.at(-1) ?? ''];
    printError(`error: ${flag ? `invalid ${flag}: ` : ''}${error.message}`);
    return EXIT_USAGE;
  }
  if (error instanceof ConfigurationError) {
    printError(`error: ${error.message}`);
    return EXIT_USAGE;
  }
  if (error instanceof DocketError) {
    printError(`error: ${error.message}`);
    return EXIT_FAILED;
  }
  printError(`error: ${error instanceof Error ? error.message : String(error)}`);
  if (process.env.DOCKET_DEBUG === '1' && error instanceof Error && error.stack) printError(error.stack);
  return EXIT_FAILED;
}
