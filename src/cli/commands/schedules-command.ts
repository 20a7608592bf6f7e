/**
 * `docket schedules create|list|show|update|pause|resume|delete`: recurring schedules, through
 * Docket's admin operations. `create` refuses an id that exists and `update` one that does not
 * (exit 1), so a typo never silently replaces or invents a schedule; `update` changes only the
 * flags given and keeps the rest of the stored definition.
 */
import { Argument, Command, Option } from '@commander-js/extra-typings';
import type { Docket } from '../../docket.js';
import type { JsonValue } from '../../job/job.js';
import { JITTER_MODES, type JitterMode } from '../../schedule/jitter.js';
import {
  MISFIRE_POLICIES,
  type MisfirePolicyName,
  normalizeScheduleSpec,
  type Schedule,
  type ScheduleInput,
} from '../../schedule/schedule.js';
import { failure, usageError } from '../cli-error.js';
import { databaseOption, jsonOption, type StoreFlags, withDocket } from '../open-cli-docket.js';
import { jsonFlag, limitFlag, numberText } from '../option-parsers.js';
import { formatFields, formatInstant, formatTable, printJson, printLine } from '../output.js';

/** The flags `create` and `update` share, as commander parses them. */
interface DefinitionFlags {
  cron?: string | undefined;
  timeZone?: string | undefined;
  kind?: string | undefined;
  payload?: JsonValue | undefined;
  queue?: string | undefined;
  priority?: number | undefined;
  maxAttempts?: number | undefined;
  timeoutMs?: number | undefined;
  jitterMs?: number | undefined;
  jitterMode?: string | undefined;
  misfire?: string | undefined;
  catchUpWindowMs?: number | undefined;
  maxCatchUpRuns?: number | undefined;
  paused?: boolean | undefined;
}

/** The definition flags plus the ones every database command takes. */
type CommandFlags = DefinitionFlags & { db?: string | undefined; json?: boolean | undefined };

/**
 * Adds the definition flags to a subcommand. Their parsed types do not survive this generic
 * helper, so the actions read them as {@link CommandFlags}: the helper is the one place they are declared.
 */
function withDefinitionFlags<C extends Command<[string], Record<string, unknown>>>(command: C) {
  return command
    .option('--cron <expr>', 'cron expression: 5 fields, or 6 with seconds first (quote it)')
    .option('--time-zone <zone>', 'IANA time zone the cron is read in (default UTC)')
    .option('--kind <kind>', 'handler kind of each run')
    .option('--payload <json>', 'payload of each run, as JSON text', jsonFlag)
    .option('--queue <name>', 'queue of each run (default: default)')
    .option('--priority <n>', 'lower runs first (default 0)', numberText)
    .option('--max-attempts <n>', 'claims before a run is parked (default 5)', numberText)
    .option('--timeout-ms <n>', 'per-attempt time limit', numberText)
    .option('--jitter-ms <n>', 'spread each run over [slot, slot + n) (default 0)', numberText)
    .addOption(new Option('--jitter-mode <mode>', 'one offset per schedule, or one per slot').choices(JITTER_MODES))
    .addOption(
      new Option('--misfire <policy>', 'missed slots: skip (default), run_once, catch_up').choices(MISFIRE_POLICIES),
    )
    .option('--catch-up-window-ms <n>', 'catch_up: only slots this recent (default 1 h)', numberText)
    .option('--max-catch-up-runs <n>', 'catch_up: at most this many runs (default 10)', numberText)
    .option('--paused', 'store it paused: enqueue nothing until resumed')
    .addOption(databaseOption())
    .addOption(jsonOption());
}

/** A stored schedule as the input that would recreate it. */
function inputOf(schedule: Schedule): ScheduleInput {
  const { job, misfire } = schedule;
  return {
    id: schedule.id,
    cron: schedule.cron,
    timeZone: schedule.timeZone,
    job: {
      kind: job.kind,
      payload: job.payload,
      queue: job.queue,
      priority: job.priority,
      maxAttempts: job.maxAttempts,
      retry: job.retry,
      ...(job.timeoutMs !== null ? { timeoutMs: job.timeoutMs } : {}),
    },
    jitterMs: schedule.jitterMs,
    jitterMode: schedule.jitterMode,
    misfire: misfire.policy === 'catch_up' ? { ...misfire } : { policy: misfire.policy },
    paused: schedule.paused,
  };
}

/** Applies the flags given over `base` (a stored schedule's input, or a bare one for create). */
function mergeFlags(base: ScheduleInput, flags: DefinitionFlags): ScheduleInput {
  const job = { ...base.job };
  if (flags.kind !== undefined) job.kind = flags.kind;
  if (flags.payload !== undefined) job.payload = flags.payload;
  if (flags.queue !== undefined) job.queue = flags.queue;
  if (flags.priority !== undefined) job.priority = flags.priority;
  if (flags.maxAttempts !== undefined) job.maxAttempts = flags.maxAttempts;
  if (flags.timeoutMs !== undefined) job.timeoutMs = flags.timeoutMs;
  const policy = (flags.misfire ?? base.misfire?.policy) as MisfirePolicyName | undefined;
  const misfire: ScheduleInput['misfire'] = policy === undefined ? {} : { policy };
  if (policy === 'catch_up') {
    // Kept from the stored schedule only while the policy stays catch_up (other policies refuse them).
    const window =
      flags.catchUpWindowMs ?? (base.misfire?.policy === 'catch_up' ? base.misfire.catchUpWindowMs : undefined);
    const runs =
      flags.maxCatchUpRuns ?? (base.misfire?.policy === 'catch_up' ? base.misfire.maxCatchUpRuns : undefined);
    if (window !== undefined) misfire.catchUpWindowMs = window;
    if (runs !== undefined) misfire.maxCatchUpRuns = runs;
  } else {
    if (flags.catchUpWindowMs !== undefined) misfire.catchUpWindowMs = flags.catchUpWindowMs;
    if (flags.maxCatchUpRuns !== undefined) misfire.maxCatchUpRuns = flags.maxCatchUpRuns;
  }
  return {
    ...base,
    ...(flags.cron !== undefined ? { cron: flags.cron } : {}),
    ...(flags.timeZone !== undefined ? { timeZone: flags.timeZone } : {}),
    ...(flags.jitterMs !== undefined ? { jitterMs: flags.jitterMs } : {}),
    ...(flags.jitterMode !== undefined ? { jitterMode: flags.jitterMode as JitterMode } : {}),
    ...(flags.paused !== undefined ? { paused: flags.paused } : {}),
    job,
    misfire,
  };
}

/** A schedule as aligned fields for `show`, `create` and `update`. */
function formatSchedule(schedule: Schedule): string {
  const { job, misfire } = schedule;
  const misfireText =
    misfire.policy === 'catch_up'
      ? `catch_up (window ${misfire.catchUpWindowMs} ms, at most ${misfire.maxCatchUpRuns} runs)`
      : misfire.policy;
  return [
    formatFields([
      ['id', schedule.id],
      ['state', schedule.paused ? 'paused' : 'active'],
      ['cron', schedule.cron],
      ['time zone', schedule.timeZone],
      ['next run at', formatInstant(schedule.nextRunAt)],
      ['next slot', formatInstant(schedule.nextSlotAt)],
      ['last slot', formatInstant(schedule.lastSlotAt)],
      ['jitter', schedule.jitterMs === 0 ? 'none' : `${schedule.jitterMs} ms (${schedule.jitterMode})`],
      ['misfire', misfireText],
      ['kind', job.kind],
      ['queue', job.queue],
      ['priority', String(job.priority)],
      ['max attempts', String(job.maxAttempts)],
      ['timeout', job.timeoutMs === null ? '-' : `${job.timeoutMs} ms`],
      ['created at', formatInstant(schedule.createdAt)],
      ['updated at', formatInstant(schedule.updatedAt)],
    ]),
    '',
    `payload: ${JSON.stringify(job.payload)}`,
  ].join('\n');
}

function printSchedule(schedule: Schedule, json: boolean | undefined): void {
  if (json) printJson(schedule);
  else printLine(formatSchedule(schedule));
}

async function mustGet(docket: Docket, id: string): Promise<Schedule> {
  const schedule = await docket.getSchedule(id);
  if (schedule === null) throw failure(`no schedule ${id}`);
  return schedule;
}

const idArgument = () => new Argument('<id>', 'schedule id (letters, digits, _ . : -)');

/** Builds the `schedules` command group. */
export function schedulesCommand() {
  const schedules = new Command('schedules').description('create, inspect, pause and delete recurring schedules');

  withDefinitionFlags(
    schedules
      .command('create')
      .description('create a schedule and enqueue its next run (--cron and --kind are required)')
      .addArgument(idArgument()),
  ).action(async (id, parsed) => {
    const options = parsed as CommandFlags;
    if (options.cron === undefined || options.kind === undefined) {
      throw usageError('schedules create needs --cron and --kind');
    }
    const input = mergeFlags({ id, cron: options.cron, job: { kind: options.kind } }, options);
    // Validated before the store is opened, so a bad definition cannot even create an empty database.
    normalizeScheduleSpec(input);
    const schedule = await withDocket(options as StoreFlags, 'create', async (docket) => {
      if ((await docket.getSchedule(id)) !== null)
        throw failure(`schedule ${id} exists; change it with schedules update`);
      return (await docket.schedule(input)).schedule;
    });
    printSchedule(schedule, options.json);
  });

  withDefinitionFlags(
    schedules
      .command('update')
      .description('change the flags given on an existing schedule; a new cron, zone or jitter re-plans from now')
      .addArgument(idArgument()),
  )
    .option('--active', 'resume it if paused (same as schedules resume)')
    .action(async (id, parsed) => {
      const options = parsed as CommandFlags & { active?: boolean | undefined };
      const schedule = await withDocket(options as StoreFlags, 'write', async (docket) => {
        const input = mergeFlags(inputOf(await mustGet(docket, id)), options);
        if (options.active) input.paused = false;
        return (await docket.schedule(input)).schedule;
      });
      printSchedule(schedule, options.json);
    });

  schedules
    .command('list')
    .description('list schedules by id with their next run times')
    .addOption(new Option('--paused', 'only paused schedules').conflicts('active'))
    .option('--active', 'only active schedules')
    .option('--limit <n>', 'at most n schedules (default 100, max 1000)', limitFlag)
    .option('--after <id>', 'only ids after this one')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const paused = options.paused ? true : options.active ? false : undefined;
      const list = await withDocket(options as StoreFlags, 'read', (docket) =>
        docket.listSchedules({ paused, limit: options.limit, afterId: options.after }),
      );
      if (options.json) printJson(list);
      else if (list.length === 0) printLine('no schedules');
      else
        printLine(
          formatTable(
            ['ID', 'STATE', 'CRON', 'ZONE', 'KIND', 'QUEUE', 'MISFIRE', 'NEXT RUN AT'],
            list.map((schedule) => [
              schedule.id,
              schedule.paused ? 'paused' : 'active',
              schedule.cron,
              schedule.timeZone,
              schedule.job.kind,
              schedule.job.queue,
              schedule.misfire.policy,
              formatInstant(schedule.nextRunAt),
            ]),
          ),
        );
    });

  schedules
    .command('show')
    .description('one schedule with its next run time')
    .addArgument(idArgument())
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (id, options) => {
      const schedule = await withDocket(options as StoreFlags, 'read', (docket) => mustGet(docket, id));
      printSchedule(schedule, options.json);
    });

  schedules
    .command('pause')
    .description('stop enqueueing: the pending run is removed, a running one finishes')
    .addArgument(idArgument())
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (id, options) => {
      const schedule = await withDocket(options as StoreFlags, 'write', (docket) => docket.pauseSchedule(id));
      if (schedule === null) throw failure(`no schedule ${id}`);
      if (options.json) printJson(schedule);
      else printLine(`schedule ${id} is paused`);
    });

  schedules
    .command('resume')
    .description('enqueue the next slot after now (slots passed while paused never run)')
    .addArgument(idArgument())
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (id, options) => {
      const schedule = await withDocket(options as StoreFlags, 'write', (docket) => docket.resumeSchedule(id));
      if (schedule === null) throw failure(`no schedule ${id}`);
      if (options.json) printJson(schedule);
      else printLine(`schedule ${id} is active, next run at ${formatInstant(schedule.nextRunAt)}`);
    });

  schedules
    .command('delete')
    .description('delete a schedule and its pending run (a running one finishes)')
    .addArgument(idArgument())
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (id, options) => {
      const deleted = await withDocket(options as StoreFlags, 'write', (docket) => docket.deleteSchedule(id));
      if (!deleted) throw failure(`no schedule ${id}`);
      if (options.json) printJson({ id, deleted });
      else printLine(`schedule ${id} deleted`);
    });

  return schedules;
}
