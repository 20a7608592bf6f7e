/**
 * One list of bad submit inputs, refused by all three faces alike: the library (`docket.submit`),
 * the CLI (`docket submit`) and the HTTP API (`POST /v1/jobs` on a real loopback server), on both
 * stores. Each input must be refused by each face with the same field name and the same message,
 * and nothing may be written. The CLI runs in-process through runCli (what src/cli/main.ts calls)
 * for speed; a few cases also run through the real executable in a child process.
 *
 * A second table does the same for job ids, `after` cursors, page limits and state lists (get,
 * cancel, retry, purge, list and dead-letter list), all judged by src/job/list-params.ts: each face
 * names the field in its own spelling (library `afterId`, HTTP `after`, CLI `--after`) and gives
 * the same reason, and the seeded jobs those ids resemble are left exactly as they were.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { ValidationError } from '../../src/job/errors.js';
import { LATEST_RUN_AT_MS } from '../../src/job/instant.js';
import type { Job } from '../../src/job/job.js';
import { MAX_PAYLOAD_BYTES } from '../../src/job/json-value.js';
import { startTestServer, type TestServer } from '../http/http-support.js';
import { storeKinds } from '../support/stores.js';
import { describeRun, runDocket, runDocketInProcess } from './run-docket.js';

/** A submit field the CLI has a flag for, and that flag. */
const FLAGS = {
  kind: '--kind',
  queue: '--queue',
  priority: '--priority',
  maxAttempts: '--max-attempts',
  runAt: '--run-at',
  delayMs: '--delay-ms',
  timeoutMs: '--timeout-ms',
  jitterMs: '--jitter-ms',
  idempotencyKey: '--idempotency-key',
  payload: '--payload',
} as const;
type Field = keyof typeof FLAGS;

/** Fields whose CLI text is read as a number when it looks like one. */
const NUMBER_FIELDS = new Set<Field>(['priority', 'maxAttempts', 'runAt', 'delayMs', 'timeoutMs', 'jitterMs']);

/** One bad input: `input` is merged over a valid submit; `field` is the one the refusal must name. */
interface BadInput {
  field: Field;
  input: Partial<Record<Field, string | number>>;
}

const bad = (field: Field, value: string | number): BadInput => ({ field, input: { [field]: value } });
const week = 7 * 24 * 3600 * 1000;

const BAD_INPUTS: BadInput[] = [
  // Kinds.
  bad('kind', ''),
  bad('kind', ' '),
  bad('kind', '\t'),
  bad('kind', 'k'.repeat(201)),
  // Queue names.
  bad('queue', ''),
  bad('queue', 'no spaces'),
  bad('queue', 'a/b'),
  bad('queue', 'q'.repeat(65)),
  bad('queue', 'ünicode'),
  bad('queue', 'semi;colon'),
  bad('queue', 'star*'),
  bad('queue', "quote'q"),
  bad('queue', 'tab\there'),
  bad('queue', 'docket.builtin'),
  // Priorities.
  bad('priority', 1.5),
  bad('priority', 32768),
  bad('priority', -32769),
  bad('priority', 'high'),
  bad('priority', 1e21),
  bad('priority', 'NaN'),
  bad('priority', ''),
  // Attempts.
  bad('maxAttempts', 0),
  bad('maxAttempts', 1001),
  bad('maxAttempts', -1),
  bad('maxAttempts', 2.5),
  bad('maxAttempts', 'many'),
  bad('maxAttempts', ''),
  // Instants: strict RFC 3339 with an offset, or whole epoch milliseconds.
  bad('runAt', '2026-02-30T00:00:00Z'),
  bad('runAt', '2025-02-29T00:00:00Z'),
  bad('runAt', '2026-04-31T12:00:00Z'),
  bad('runAt', '2026-13-01T00:00:00Z'),
  bad('runAt', '2026-00-10T00:00:00Z'),
  bad('runAt', '2026-01-00T00:00:00Z'),
  bad('runAt', '2026-01-01'),
  bad('runAt', '2026-01-01T00:00:00'),
  bad('runAt', '2026-01-01T24:00:00Z'),
  bad('runAt', '2026-01-01T00:60:00Z'),
  bad('runAt', '2026-01-01T00:00:61Z'),
  bad('runAt', '2026-01-01T00:00:00+25:00'),
  bad('runAt', '2026-01-01T00:00:00+01:60'),
  bad('runAt', '2026-1-1T00:00:00Z'),
  bad('runAt', '01/02/2026'),
  bad('runAt', 'Thu, 01 Jan 2026 00:00:00 GMT'),
  bad('runAt', 'tomorrow'),
  bad('runAt', ''),
  bad('runAt', '+002026-01-01T00:00:00Z'),
  bad('runAt', -1),
  bad('runAt', 1.5),
  bad('runAt', LATEST_RUN_AT_MS + 1),
  // Durations.
  bad('delayMs', -1),
  bad('delayMs', 1.5),
  bad('delayMs', 'soon'),
  bad('delayMs', LATEST_RUN_AT_MS + 1),
  bad('timeoutMs', 0),
  bad('timeoutMs', -5),
  bad('timeoutMs', 1.5),
  bad('timeoutMs', '1s'),
  bad('timeoutMs', week + 1),
  bad('jitterMs', -1),
  bad('jitterMs', 0.5),
  bad('jitterMs', 'x'),
  bad('jitterMs', week + 1),
  // Idempotency keys.
  bad('idempotencyKey', ''),
  bad('idempotencyKey', 'k'.repeat(201)),
  // Payloads.
  bad('payload', 'p'.repeat(MAX_PAYLOAD_BYTES)),
  // Two fields that exclude each other.
  { field: 'delayMs', input: { runAt: '2030-01-01T00:00:00Z', delayMs: 5 } },
];

const VALID_KIND = 'cross.face';

/** The library's and HTTP's submit input. */
function submitInput(input: BadInput['input']): Record<string, unknown> {
  return { kind: VALID_KIND, ...input };
}

/** The same input as `docket submit` flags. */
function cliArgs(input: BadInput['input']): string[] {
  const args: string[] = [];
  const all = { kind: VALID_KIND, ...input };
  for (const [field, value] of Object.entries(all) as [Field, string | number][]) {
    args.push(FLAGS[field], field === 'payload' ? JSON.stringify(value) : String(value));
  }
  return args;
}

/** A refusal as each face reports it. */
interface Refusal {
  field: string;
  message: string;
}

/** `error: invalid --flag: <field>: <rest>` → the library's field and whole message. */
function parseCliRefusal(stderr: string): Refusal | undefined {
  const match = /^error: invalid (--[a-z-]+): (([A-Za-z.[\]0-9]+): [^\n]*)$/m.exec(stderr);
  if (!match?.[2] || !match[3]) return undefined;
  return { field: match[3], message: match[2] };
}

it('has at least 60 bad inputs, each expressible on the command line as it is in JSON', () => {
  expect(BAD_INPUTS.length).toBeGreaterThanOrEqual(60);
  for (const { input } of BAD_INPUTS) {
    for (const [field, value] of Object.entries(input) as [Field, string | number][]) {
      // A number field's text that looks like a number is read as that number, so such a string
      // could not be sent from the CLI; the table must not contain one.
      if (NUMBER_FIELDS.has(field) && typeof value === 'string') {
        expect(/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(value.trim()), `${field} ${value}`).toBe(false);
      }
      if (typeof value === 'number') expect(Number(String(value))).toBe(value);
    }
  }
});

describe.each(storeKinds())('one bad input, one refusal, on every face (%s)', (kind) => {
  let server: TestServer;
  let docket: Docket;

  beforeAll(async () => {
    server = await startTestServer({ kind });
    docket = await Docket.open({ url: server.db.url });
  }, 30_000);
  afterAll(async () => {
    await docket?.close();
    await server?.stop();
  });

  it.each(BAD_INPUTS.map((entry, i) => [i, entry.field, entry] as const))(
    'case %i (%s): the same field and message from the library, the CLI and POST /v1/jobs',
    async (_i, field, { input }) => {
      let library: Refusal | undefined;
      try {
        await docket.submit(submitInput(input) as never);
      } catch (error) {
        expect(error).toBeInstanceOf(ValidationError);
        library = { field: (error as ValidationError).field, message: (error as ValidationError).message };
      }
      expect(library, 'the library accepted it').toBeDefined();
      expect(library?.field.split(/[.[]/)[0]).toBe(field);

      const response = await server.call('POST', '/v1/jobs', { body: submitInput(input) });
      expect(response.status, JSON.stringify(response.body)).toBe(400);
      const error = (response.body as { error: Refusal & { code: string } }).error;
      expect({ field: error.field, message: error.message }).toEqual(library);

      const cli = await runDocketInProcess(['submit', '--db', server.db.url, ...cliArgs(input)]);
      expect(cli.code, describeRun(cli)).toBe(2);
      expect(cli.stdout).toBe('');
      expect(parseCliRefusal(cli.stderr), cli.stderr).toEqual(library);
      expect(cli.stderr).toContain(`error: invalid ${FLAGS[field]}: `);
    },
  );

  it('wrote nothing for any of them', async () => {
    expect(await docket.listJobs({ limit: 1000 })).toEqual([]);
    expect(await docket.listDeadLetters({ limit: 1000 })).toEqual([]);
    expect((await docket.queueStats()).length).toBe(0);
  });
});

describe('the real executable refuses as runCli does', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-cross-face-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints the same refusal from a child process, and creates no database for bad input', async () => {
    const url = `sqlite:${join(dir, 'never-created.db')}`;
    const picks = [BAD_INPUTS[0], BAD_INPUTS.find((b) => b.input.runAt === '2026-02-30T00:00:00Z'), BAD_INPUTS[14]];
    const results = await Promise.all(
      picks.map(async (entry) => {
        const args = ['submit', '--db', url, ...cliArgs(entry?.input ?? {})];
        return [await runDocket(args), await runDocketInProcess(args)] as const;
      }),
    );
    for (const [child, inProcess] of results) {
      expect(child.code, describeRun(child)).toBe(2);
      expect(child.stderr).toBe(inProcess.stderr);
      expect(child.stdout).toBe('');
    }
    expect(existsSync(join(dir, 'never-created.db'))).toBe(false);
  }, 60_000);
});

/** The jobs a list case runs next to: a pending job and a parked one, whose ids bad inputs resemble. */
interface Seeded {
  pending: string;
  dead: string;
}

/**
 * One bad id, cursor, limit or state list, as each face takes it. Text may hold `$P` and `$D`,
 * replaced by the seeded pending and dead job's ids, so `$P.0` or `+$D` would name a real job to
 * a face that read ids loosely (and the test would see that job changed).
 */
interface ParamCase {
  name: string;
  /** The library call. */
  library: (docket: Docket, text: (value: string) => string) => Promise<unknown>;
  /** The HTTP request: method, path (and query) and an optional JSON body. */
  http: (text: (value: string) => string) => { method: string; path: string; body?: unknown };
  /** `docket` arguments; `--db <url>` is added after the first two. */
  cli: (text: (value: string) => string) => string[];
  /** The field the library names, as HTTP names it, and the flag or argument the CLI names. */
  libraryField: string;
  httpField: string;
  flag: string;
}

const BAD_JOB_IDS = [
  'abc',
  '-1',
  '$P.0',
  '+$P',
  ' $D',
  '$De0',
  '0x$P',
  '\u0661',
  '9007199254740992',
  '99999999999999999999',
  '$P OR 1=1',
];
const BAD_CURSORS = ['', 'abc', '-$P', '$P.5', '9007199254740992'];
const BAD_LIMITS: (number | string)[] = [0, -1, 1.5, 1001, 1_000_000, 1e21, 'ten', '', 'NaN'];
const BAD_STATES: string[][] = [
  ['zombie'],
  ['pending', 'zombie'],
  ['Pending'],
  [''],
  ['pending', ''],
  ['pending', ' dead'],
  ["pending' OR '1'='1"],
];
const BAD_PURGE_IDS: string[][] = [['x'], ['$D', '$D.0'], [' $D'], ['-$D'], ['$D', '9007199254740992']];

/** The single-id operations: the library method, its HTTP route and its CLI command. */
const ID_OPERATIONS = [
  {
    op: 'getJob',
    library: (d: Docket, id: string) => d.getJob(id),
    http: (id: string) => ({ method: 'GET', path: `/v1/jobs/${id}` }),
    cli: ['jobs', 'show'],
  },
  {
    op: 'cancelJob',
    library: (d: Docket, id: string) => d.cancelJob(id),
    http: (id: string) => ({ method: 'POST', path: `/v1/jobs/${id}/cancel` }),
    cli: ['jobs', 'cancel'],
  },
  {
    op: 'retryDeadLetter',
    library: (d: Docket, id: string) => d.retryDeadLetter(id),
    http: (id: string) => ({ method: 'POST', path: `/v1/dead-letters/${id}/retry` }),
    cli: ['dead', 'retry'],
  },
] as const;

/** The two lists, with the HTTP path and CLI command of each. */
const LISTS = [
  { list: 'listJobs', path: '/v1/jobs', cli: ['jobs', 'list'] },
  { list: 'listDeadLetters', path: '/v1/dead-letters', cli: ['dead', 'list'] },
] as const;

const listCall = (docket: Docket, list: (typeof LISTS)[number]['list'], params: object) =>
  list === 'listJobs' ? docket.listJobs(params as never) : docket.listDeadLetters(params as never);

const PARAM_CASES: ParamCase[] = [
  ...ID_OPERATIONS.flatMap(({ op, library, http, cli }) =>
    BAD_JOB_IDS.map(
      (id): ParamCase => ({
        name: `${op}(${JSON.stringify(id)})`,
        library: (docket, text) => library(docket, text(id)),
        http: (text) => http(encodeURIComponent(text(id))),
        // After `--`, so an id like -1 is read as the argument it is, not as an option.
        cli: (text) => [...cli, '--', text(id)],
        libraryField: 'id',
        httpField: 'id',
        flag: '<id>',
      }),
    ),
  ),
  ...BAD_PURGE_IDS.map((ids): ParamCase => {
    const index = ids.findIndex((id) => !/^\$D$/.test(id));
    return {
      name: `purgeDeadLetters ids ${JSON.stringify(ids)}`,
      library: (docket, text) => docket.purgeDeadLetters({ ids: ids.map(text) }),
      http: (text) => ({ method: 'POST', path: '/v1/dead-letters/purge', body: { ids: ids.map(text) } }),
      cli: (text) => ['dead', 'purge', ...ids.flatMap((id) => ['--id', text(id)])],
      libraryField: `ids[${index}]`,
      httpField: `ids[${index}]`,
      flag: '--id',
    };
  }),
  ...LISTS.flatMap(({ list, path, cli }) =>
    BAD_CURSORS.map(
      (after): ParamCase => ({
        name: `${list} after ${JSON.stringify(after)}`,
        library: (docket, text) => listCall(docket, list, { afterId: text(after) }),
        http: (text) => ({ method: 'GET', path: `${path}?after=${encodeURIComponent(text(after))}` }),
        cli: (text) => [...cli, '--after', text(after)],
        libraryField: 'afterId',
        httpField: 'after',
        flag: '--after',
      }),
    ),
  ),
  ...LISTS.flatMap(({ list, path, cli }) =>
    // Every bad limit on the job list; a few on the dead-letter list, which parses it alike.
    (list === 'listJobs' ? BAD_LIMITS : [0, 1001, 'ten']).map(
      (limit): ParamCase => ({
        name: `${list} limit ${JSON.stringify(limit)}`,
        library: (docket) => listCall(docket, list, { limit }),
        http: () => ({ method: 'GET', path: `${path}?limit=${encodeURIComponent(String(limit))}` }),
        cli: () => [...cli, '--limit', String(limit)],
        libraryField: 'limit',
        httpField: 'limit',
        flag: '--limit',
      }),
    ),
  ),
  ...BAD_STATES.map((states): ParamCase => {
    const index = states.findIndex((state) => !['pending', 'running', 'done', 'cancelled', 'dead'].includes(state));
    return {
      name: `listJobs states ${JSON.stringify(states)}`,
      library: (docket) => docket.listJobs({ states: states as Job['state'][] }),
      // One comma-separated parameter over HTTP and on the command line.
      http: () => ({ method: 'GET', path: `/v1/jobs?state=${encodeURIComponent(states.join(','))}` }),
      cli: () => ['jobs', 'list', '--state', states.join(',')],
      libraryField: `states[${index}]`,
      httpField: 'state',
      flag: '--state',
    };
  }),
];

/** The CLI arguments of a case with `--db <url>` after the command and subcommand. */
function paramCliArgs(entry: ParamCase, url: string, text: (value: string) => string): string[] {
  const args = entry.cli(text);
  return [...args.slice(0, 2), '--db', url, ...args.slice(2)];
}

it('has at least 15 id, cursor, limit and state inputs, each expressible in every face', () => {
  expect(PARAM_CASES.length).toBeGreaterThanOrEqual(15);
  for (const limit of BAD_LIMITS) {
    // The CLI and HTTP read limit text as a number when it looks like one (numberText), so the
    // table's text limits must not look like one and its number limits must survive String().
    if (typeof limit === 'string') expect(/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(limit.trim())).toBe(false);
    else expect(Number(String(limit))).toBe(limit);
  }
  // Comma-separated on two faces: a state with a comma in it could not be sent.
  for (const states of BAD_STATES) for (const state of states) expect(state).not.toContain(',');
});

describe.each(storeKinds())('one bad id, cursor, limit or state, one refusal, on every face (%s)', (kind) => {
  let server: TestServer;
  let docket: Docket;
  let seeded: Seeded;
  let before: Job[];
  const text = (value: string) => value.replaceAll('$P', seeded.pending).replaceAll('$D', seeded.dead);

  beforeAll(async () => {
    server = await startTestServer({ kind });
    docket = await Docket.open({ url: server.db.url });
    docket.handle('cross.fails', () => {
      throw new Error('always fails');
    });
    const parked = new Promise<string>((resolve) => docket.events.on('parked', ({ job }) => resolve(job.id)));
    const dead = await docket.submit({ kind: 'cross.fails', maxAttempts: 1 });
    const worker = docket.worker({ pollIntervalMs: 20, leaseMs: 5000 });
    await worker.start();
    expect(await parked).toBe(dead.id);
    await worker.stop();
    const pending = await docket.submit({ kind: 'cross.waits', delayMs: 3600_000 });
    seeded = { pending: pending.id, dead: dead.id };
    before = await docket.listJobs({ limit: 1000 });
    expect(before.map((job) => [job.id, job.state])).toEqual([
      [dead.id, 'dead'],
      [pending.id, 'pending'],
    ]);
  }, 30_000);
  afterAll(async () => {
    await docket?.close();
    await server?.stop();
  });

  it.each(PARAM_CASES.map((entry) => [entry.name, entry] as const))(
    '%s: the same reason from the library, HTTP and the CLI, each naming its field',
    async (_name, entry) => {
      let library: Refusal | undefined;
      try {
        await entry.library(docket, text);
      } catch (error) {
        expect(error).toBeInstanceOf(ValidationError);
        library = { field: (error as ValidationError).field, message: (error as ValidationError).message };
      }
      expect(library, 'the library accepted it').toBeDefined();
      expect(library?.field).toBe(entry.libraryField);
      const prefix = `${entry.libraryField}: `;
      expect(library?.message.startsWith(prefix), library?.message).toBe(true);
      const reason = library?.message.slice(prefix.length) ?? '';

      const request = entry.http(text);
      const response = await server.call(request.method, request.path, { body: request.body });
      expect(response.status, JSON.stringify(response.body)).toBe(400);
      const error = (response.body as { error: Refusal & { code: string } }).error;
      expect(error).toEqual({
        code: 'invalid_input',
        field: entry.httpField,
        message: `${entry.httpField}: ${reason}`,
      });

      const cli = await runDocketInProcess(paramCliArgs(entry, server.db.url, text));
      expect(cli.code, describeRun(cli)).toBe(2);
      expect(cli.stdout).toBe('');
      expect(cli.stderr.trim()).toBe(`error: invalid ${entry.flag}: ${library?.message}`);
    },
  );

  it('refuses a misspelt list or purge parameter in the library instead of ignoring it', async () => {
    await expect(docket.listJobs({ after: seeded.pending } as never)).rejects.toMatchObject({ field: 'after' });
    await expect(docket.listDeadLetters({ states: ['dead'] } as never)).rejects.toMatchObject({ field: 'states' });
    await expect(docket.purgeDeadLetters({ id: [seeded.dead] } as never)).rejects.toMatchObject({ field: 'id' });
  });

  it('left the jobs those inputs resemble exactly as they were, and wrote nothing else', async () => {
    const after = await docket.listJobs({ limit: 1000 });
    expect(after).toEqual(before);
    expect((await docket.listDeadLetters()).map((job) => job.id)).toEqual([seeded.dead]);
  });
});

describe('the CLI refuses a bad id, cursor, limit or state before opening a database', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-cross-face-params-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('exits 2 for every case and never creates the database file', async () => {
    const url = `sqlite:${join(dir, 'never-created.db')}`;
    const text = (value: string) => value.replaceAll('$P', '1').replaceAll('$D', '2');
    for (const entry of PARAM_CASES) {
      const cli = await runDocketInProcess(paramCliArgs(entry, url, text));
      expect(cli.code, `${entry.name}\n${describeRun(cli)}`).toBe(2);
      expect(cli.stderr).toContain(`error: invalid ${entry.flag}: `);
    }
    expect(existsSync(join(dir, 'never-created.db'))).toBe(false);
  });

  it('prints the same refusal from the real executable', async () => {
    const url = `sqlite:${join(dir, 'never-created.db')}`;
    const text = (value: string) => value.replaceAll('$P', '1').replaceAll('$D', '2');
    const picks = ['getJob("-1")', 'listJobs limit 1001', 'listJobs states ["pending","zombie"]'].map((name) => {
      const entry = PARAM_CASES.find((candidate) => candidate.name === name);
      expect(entry, name).toBeDefined();
      return paramCliArgs(entry as ParamCase, url, text);
    });
    const children = await Promise.all(picks.map((args) => runDocket(args)));
    for (const [i, child] of children.entries()) {
      const inProcess = await runDocketInProcess(picks[i] ?? []);
      expect(child.code, describeRun(child)).toBe(2);
      expect(child.stdout).toBe('');
      expect(child.stderr).toBe(inProcess.stderr);
    }
    expect(existsSync(join(dir, 'never-created.db'))).toBe(false);
  }, 60_000);
});
