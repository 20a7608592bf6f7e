/**
 * How commands print: aligned tables and key/value blocks for people, JSON for scripts. Results go
 * to stdout, messages to stderr, so `id=$(docket submit ...)` captures only the id.
 */
import type { Job } from '../job/job.js';

/** Writes one line to stdout. */
export function printLine(text = ''): void {
  process.stdout.write(`${text}\n`);
}

/** Writes one line to stderr. */
export function printError(text: string): void {
  process.stderr.write(`${text}\n`);
}

/** Writes a value as pretty JSON (Dates become ISO strings). */
export function printJson(value: unknown): void {
  printLine(JSON.stringify(value, null, 2));
}

/** Formats rows under headers as left-aligned columns separated by two spaces. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** Formats `label: value` pairs with the values aligned. */
export function formatFields(fields: readonly (readonly [string, string])[]): string {
  const width = Math.max(...fields.map(([label]) => label.length)) + 1;
  return fields.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`).join('\n');
}

/** An instant as ISO-8601 (UTC), or `-` when absent. */
export function formatInstant(value: Date | null | undefined): string {
  return value ? value.toISOString() : '-';
}

/** One job as a table row for {@link JOB_TABLE_HEADERS}. */
export function jobRow(job: Job): string[] {
  return [
    job.id,
    job.state,
    job.queue,
    job.kind,
    String(job.priority),
    `${job.attempts}/${job.maxAttempts}`,
    String(job.token),
    formatInstant(job.state === 'pending' || job.state === 'running' ? job.runAt : job.finishedAt),
  ];
}

/** Column headers matching {@link jobRow}. */
export const JOB_TABLE_HEADERS = ['ID', 'STATE', 'QUEUE', 'KIND', 'PRIORITY', 'ATTEMPTS', 'TOKEN', 'RUN/FINISHED AT'];

/** A job's full record as aligned fields, followed by its payload and attempt errors. */
export function formatJob(job: Job): string {
  const fields: [string, string][] = [
    ['id', job.id],
    ['kind', job.kind],
    ['queue', job.queue],
    ['state', job.state],
    ['priority', String(job.priority)],
    ['run at', formatInstant(job.runAt)],
    ['attempts', `${job.attempts} of ${job.maxAttempts}`],
    ['token', String(job.token)],
    ['lease until', formatInstant(job.leaseUntil)],
    ['lease owner', job.leaseOwner ?? '-'],
    ['idempotency key', job.idempotencyKey ?? '-'],
    ['timeout', job.timeoutMs === null ? '-' : `${job.timeoutMs} ms`],
    [
      'retry policy',
      `base ${job.retryPolicy.baseDelayMs} ms x${job.retryPolicy.factor}, max ${job.retryPolicy.maxDelayMs} ms, jitter ${job.retryPolicy.jitterRatio}`,
    ],
    ['created at', formatInstant(job.createdAt)],
    ['finished at', formatInstant(job.finishedAt)],
  ];
  if (job.scheduleId !== null) {
    fields.push(['schedule', `${job.scheduleId} slot ${formatInstant(job.scheduleSlot)}`]);
  }
  const lines = [formatFields(fields), '', `payload: ${JSON.stringify(job.payload)}`];
  lines.push(job.errors.length === 0 ? 'errors: none' : `errors (${job.errors.length}):`);
  for (const error of job.errors) {
    lines.push(`  attempt ${error.attempt}  ${formatInstant(error.at)}  ${error.kind}  ${error.message}`);
  }
  return lines.join('\n');
}
