// Scratch (run with node --import tsx, for the .ts import): what each index entry at completion costs the database, by pg_stat_statements.
import pg from '/work/main/node_modules/pg/lib/index.js';
import { Docket } from '/work/main/src/docket.ts';
const ADMIN = 'postgres://root@127.0.0.1:5499/postgres';
const N = Number(process.argv[2] ?? 20000), ROUNDS = Number(process.argv[3] ?? 3), DRAINS = 3;
const VARIANTS = {
  ...(process.env.ONLY ? {} : { 'all indexes': [] }),
  'no jobs_finished_idx': ['docket.jobs_finished_idx'],
  'no jobs_listed_state_queue_id_idx': ['docket.jobs_listed_state_queue_id_idx'],
  'neither': ['docket.jobs_finished_idx', 'docket.jobs_listed_state_queue_id_idx'],
};
const admin = new pg.Client({ connectionString: ADMIN }); await admin.connect();
const results = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, drop] of Object.entries(VARIANTS).filter(([n]) => !process.env.VARIANT || n === process.env.VARIANT)) {
    await admin.query('DROP DATABASE IF EXISTS idxcost WITH (FORCE)'); await admin.query('CREATE DATABASE idxcost');
    const url = 'postgres://root@127.0.0.1:5499/idxcost';
    const docket = await Docket.open({ url });
    const db = new pg.Client({ connectionString: url }); await db.connect();
    for (const index of drop) await db.query(`DROP INDEX ${index}`);
    await db.end();
    let done = 0; let target = 0; let resolveDrain = () => {};
    docket.handle('noop', async () => { done += 1; if (done === target) resolveDrain(); });
    const worker = docket.worker({ concurrency: 24, prefetch: 500 }); await worker.start();
    await admin.query('SELECT pg_stat_statements_reset()');
    for (let d = 0; d < DRAINS; d++) {
      target += N;
      const drained = new Promise((resolve) => { resolveDrain = resolve; });
      const runAt = new Date((await docket.store.now()).getTime() + 2000);
      for (let i = 0; i < N; i += 5000) await docket.submitMany(Array.from({ length: Math.min(5000, N - i) }, (_, j) => ({ kind: 'noop', payload: { i: i + j }, runAt })));
      await drained; if (process.env.DEBUG) console.log('drained', d);
    }
    while (worker.stats.completed < target) await new Promise((r) => setTimeout(r, 20));
    const rows = (await admin.query(`SELECT query, total_exec_time FROM pg_stat_statements WHERE toplevel AND (query LIKE '%complete_jobs%' OR query LIKE '%claim_pending%')`)).rows;
    const sum = (needle) => rows.filter((x) => x.query.includes(needle)).reduce((a, x) => a + x.total_exec_time, 0);
    const per = { complete: (sum('complete_jobs') * 1000) / target, claim: (sum('claim_pending') * 1000) / target };
    (results[name] ??= []).push(per);
    console.log(`round ${r + 1} ${name}: completion ${per.complete.toFixed(1)} µs a job, claim ${per.claim.toFixed(1)} µs a job`);
    await worker.stop(); await docket.close();
  }
}
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const [name, per] of Object.entries(results))
  console.log(`${name}: completion ${med(per.map((p) => p.complete)).toFixed(1)} µs a job, claim ${med(per.map((p) => p.claim)).toFixed(1)} µs a job (medians of ${per.length})`);
await admin.end();
