// Scratch: graphile-worker 0.18 tuned, one running worker process, drains several backlogs in turn.
import { fork } from 'node:child_process';
import pg from '/work/main/node_modules/pg/lib/index.js';
import { readdirSync, readFileSync } from 'node:fs';
function pgCpuMs() { let t = 0; for (const pid of readdirSync('/proc')) { if (!/^\d+$/.test(pid)) continue; let s; try { s = readFileSync(`/proc/${pid}/stat`, 'utf8'); } catch { continue; } if (!s.includes('(postgres)')) continue; const f = s.slice(s.lastIndexOf(')') + 2).split(' '); t += Number(f[11]) + Number(f[12]); } return t * 10; }
const gwPath = '/work/main/bench/peers-latest/node_modules/graphile-worker/dist/index.js';
const N = Number(process.argv[3] ?? 20000), DRAINS = 3, ROUNDS = Number(process.argv[4] ?? 3);
const url = 'postgres://root@127.0.0.1:5432/gwwarm';
if (process.argv[2] === 'child') {
  const { run, Logger } = await import(gwPath);
  const silent = new Logger(() => () => {});
  let started = 0, target = 0, first = 0, cpu0 = process.cpuUsage();
  process.on('message', (m) => { started = 0; target = m.drain; });
  await run({ connectionString: url, concurrency: 24, noHandleSignals: true, logger: silent,
    preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0, maxPoolSize: 25 } },
    taskList: { noop: async () => { started++; if (started === 1) { first = performance.now(); cpu0 = process.cpuUsage(); }
      if (started === target) { const c = process.cpuUsage(cpu0); process.send({ report: { rate: target / ((performance.now() - first) / 1000), cpu: (c.user + c.system) / target } }); } } } });
  process.send({ ready: true });
} else {
  const { makeWorkerUtils, runMigrations, Logger } = await import(gwPath);
  const silent = new Logger(() => () => {});
  const res = [];
  for (let r = 0; r < ROUNDS; r++) {
    const admin = new pg.Client({ connectionString: 'postgres://root@127.0.0.1:5432/postgres' }); await admin.connect();
    await admin.query('DROP DATABASE IF EXISTS gwwarm WITH (FORCE)'); await admin.query('CREATE DATABASE gwwarm'); await admin.end();
    await runMigrations({ connectionString: url, logger: silent });
    const utils = await makeWorkerUtils({ connectionString: url, logger: silent });
    const child = fork(new URL(import.meta.url).pathname, ['child'], { execPath: process.execPath, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const queue = []; const waiters = []; child.on('message', (m) => { const w = waiters.shift(); if (w) w(m); else queue.push(m); });
    const next = () => queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiters.push(r));
    await next();
    const row = [];
    for (let d = 0; d < DRAINS; d++) {
      child.send({ drain: N });
      const runAt = new Date(Date.now() + 3000);
      for (let i = 0; i < N; i += 5000) await utils.addJobs(Array.from({ length: 5000 }, (_, j) => ({ identifier: 'noop', payload: { i: i + j }, runAt })));
      if (Date.now() >= runAt.getTime()) throw new Error('slow insert');
      const db0 = pgCpuMs(); const m = await next(); await new Promise((r) => setTimeout(r, 300)); m.report.db = (pgCpuMs() - db0) * 1000 / N; row.push(m.report);
      console.log(`round ${r + 1} drain ${d + 1}: ${Math.round(m.report.rate)} jobs/s, worker CPU ${m.report.cpu.toFixed(1)} µs a job, db CPU ${m.report.db.toFixed(1)} µs a job (from the due instant's approach, incl. completions)`);
    }
    res.push(row); child.kill(); await utils.release();
  }
  const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  for (let d = 0; d < DRAINS; d++) console.log(`graphile-worker 0.18 tuned drain ${d + 1}: ${Math.round(med(res.map((x) => x[d].rate)))} jobs/s, worker CPU ${med(res.map((x) => x[d].cpu)).toFixed(1)} µs a job`);
}
