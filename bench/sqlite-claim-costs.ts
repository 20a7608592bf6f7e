/**
 * Where a SQLite drain's time goes, per job: the claim's UPDATE alone, the same UPDATE answering
 * its rows as keyed objects (`RETURNING *`, better-sqlite3's default: the form before issue 17's
 * fifth session) and as arrays (`RETURNING` JOB_COLUMNS in raw mode: the form the store
 * sends), and the completions that follow: one statement for the batch (JOB_COMPLETE_MANY, as the
 * store's jobCompleteMany sends them) or, in the last form, one JOB_COMPLETE per job (the store
 * before the tenth session). Statements straight on better-sqlite3, no worker and no
 * conversion to Jobs, so the figures are the database's and the driver's alone.
 *
 *   npx tsx bench/sqlite-claim-costs.ts                 100,000 jobs, claims of 500, 3 rounds
 *   npx tsx bench/sqlite-claim-costs.ts --jobs 20000 --claim 50 --rounds 5
 *
 * Each round copies one file of `--jobs` pending no-op jobs (submitted through Docket) per form,
 * then drains it: the due-candidate read, the claim, and one transaction completing the batch.
 * Forms alternate in order between rounds.
 * Printed: the median µs per job of each step per form, and the jobs/s the three steps allow.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { Docket } from '../src/docket.js';
import { JOB_COLUMN_AT } from '../src/store/job-columns.js';
import { JOB_CLAIM_MANY, JOB_DUE_PENDING } from '../src/store/sqlite/claim-queries.js';
import { JOB_COMPLETE, JOB_COMPLETE_MANY } from '../src/store/sqlite/job-queries.js';
import { median } from './stats.js';

const { values: args } = parseArgs({
  options: {
    jobs: { type: 'string', default: '100000' },
    claim: { type: 'string', default: '500' },
    rounds: { type: 'string', default: '3' },
  },
});
const JOBS = Number(args.jobs);
const CLAIM = Number(args.claim);
const ROUNDS = Number(args.rounds);
for (const [flag, value] of [
  ['jobs', JOBS],
  ['claim', CLAIM],
  ['rounds', ROUNDS],
] as const) {
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`--${flag} must be a positive integer`);
}

const RETURNING = /RETURNING [^`]*$/;
if (!RETURNING.test(JOB_CLAIM_MANY)) throw new Error('JOB_CLAIM_MANY no longer ends in a RETURNING list');

/** The claim forms compared: the statement and how its rows are read. */
const FORMS = {
  'update only': { sql: JOB_CLAIM_MANY.replace(RETURNING, ''), rows: 'none', completions: 'batch' },
  'rows as objects': { sql: JOB_CLAIM_MANY.replace(RETURNING, 'RETURNING *'), rows: 'objects', completions: 'batch' },
  'rows as arrays': { sql: JOB_CLAIM_MANY, rows: 'arrays', completions: 'batch' },
  'rows as arrays, completed job by job': { sql: JOB_CLAIM_MANY, rows: 'arrays', completions: 'each' },
} as const;
type Form = keyof typeof FORMS;

const dir = mkdtempSync(join(tmpdir(), 'docket-sqlite-claim-costs-'));
const seed = join(dir, 'seed.db');

async function seedFile(): Promise<void> {
  const docket = await Docket.open({ url: `sqlite:${seed}` });
  for (let i = 0; i < JOBS; i += 1000) {
    const n = Math.min(1000, JOBS - i);
    await docket.submitMany(Array.from({ length: n }, (_, j) => ({ kind: 'bench.noop', payload: { i: i + j } })));
  }
  await docket.close();
  // Folds the WAL into the file, so each copy is the whole database.
  const db = new Database(seed);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

interface Costs {
  dueUs: number;
  claimUs: number;
  completeUs: number;
}

function drain(form: Form, round: number): Costs {
  const path = join(dir, `round-${round}-${form.replace(/ /g, '-')}.db`);
  copyFileSync(seed, path);
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const { sql, rows, completions } = FORMS[form];
  const due = db.prepare<Record<string, unknown>, { id: number }>(JOB_DUE_PENDING);
  const claim = db.prepare(sql);
  if (rows === 'arrays') claim.raw();
  const complete = db.prepare(JOB_COMPLETE);
  const completeMany = db.prepare(JOB_COMPLETE_MANY);
  const nowMs = Date.now() + 1000;
  let dueMs = 0;
  let claimMs = 0;
  let completeMs = 0;
  let claimed = 0;
  for (;;) {
    const leases = db
      .transaction(() => {
        const started = performance.now();
        const candidates = due.all({ queue: 'default', kind: 'bench.noop', priority: 0, now: nowMs, limit: CLAIM });
        const read = performance.now();
        dueMs += read - started;
        if (candidates.length === 0) return [];
        const params = {
          ids: JSON.stringify(candidates.map((candidate) => candidate.id)),
          now: nowMs,
          lease_until: nowMs + 60_000,
          owner: 'bench',
          message: 'lease expired',
        };
        let answered: { id: number; token: number }[];
        if (rows === 'none') {
          claim.run(params);
          // The tokens a real claim would read back: every job is claimed for the first time.
          answered = candidates.map((candidate) => ({ id: candidate.id, token: 1 }));
        } else if (rows === 'objects') {
          answered = claim.all(params) as { id: number; token: number }[];
        } else {
          answered = (claim.all(params) as unknown[][]).map((row) => ({
            id: row[JOB_COLUMN_AT.id] as number,
            token: row[JOB_COLUMN_AT.token] as number,
          }));
        }
        claimMs += performance.now() - read;
        return answered;
      })
      .immediate();
    if (leases.length === 0) break;
    claimed += leases.length;
    const started = performance.now();
    const done = db
      .transaction(() => {
        if (completions === 'batch') {
          const held = leases.map((lease) => [lease.id, lease.token]);
          return completeMany.run({ leases: JSON.stringify(held), owner: 'bench', now: nowMs }).changes;
        }
        let changes = 0;
        for (const lease of leases) {
          changes += complete.run({ id: lease.id, token: lease.token, owner: 'bench', now: nowMs }).changes;
        }
        return changes;
      })
      .immediate();
    completeMs += performance.now() - started;
    if (done !== leases.length) throw new Error(`${form}: ${leases.length - done} completions refused`);
  }
  db.close();
  for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
  if (claimed !== JOBS) throw new Error(`${form}: claimed ${claimed} of ${JOBS} jobs`);
  const perJobUs = (ms: number) => (ms * 1000) / JOBS;
  return { dueUs: perJobUs(dueMs), claimUs: perJobUs(claimMs), completeUs: perJobUs(completeMs) };
}

try {
  await seedFile();
  const forms = Object.keys(FORMS) as Form[];
  const results = new Map<Form, Costs[]>(forms.map((form) => [form, []]));
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const form of round % 2 === 1 ? forms : [...forms].reverse()) {
      const costs = drain(form, round);
      results.get(form)?.push(costs);
      console.log(
        `round ${round} ${form}: due ${costs.dueUs.toFixed(1)} µs/job, claim ${costs.claimUs.toFixed(1)}, complete ${costs.completeUs.toFixed(1)}`,
      );
    }
  }
  console.log(`\nmedians of ${ROUNDS} rounds, ${JOBS.toLocaleString('en')} jobs, claims of ${CLAIM}:`);
  console.log('| claim form | due read µs/job | claim µs/job | complete µs/job | jobs/s these allow |');
  console.log('|---|---|---|---|---|');
  for (const form of forms) {
    const runs = results.get(form) ?? [];
    const due = median(runs.map((r) => r.dueUs));
    const claim = median(runs.map((r) => r.claimUs));
    const complete = median(runs.map((r) => r.completeUs));
    const rate = Math.round(1e6 / (due + claim + complete)).toLocaleString('en');
    console.log(`| ${form} | ${due.toFixed(1)} | ${claim.toFixed(1)} | ${complete.toFixed(1)} | ${rate} |`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
