// Scratch: one spike of N jobs into a fresh in-process worker; logs every claim (sent, answered, limit, got) relative to the due instant.
if (process.env.COMPLETIONS) await import('./patch-complete.scratch.mjs');
import { Docket } from '/work/main/src/index.ts';
import { PostgresStore } from '/work/main/src/store/postgres/postgres-store.ts';
const variant = process.argv[2] ?? 'default';
const n = Number(process.argv[3] ?? 10000);
const claims = [];
const orig = PostgresStore.prototype.jobClaim;
PostgresStore.prototype.jobClaim = async function (p) {
  const sent = performance.now();
  const jobs = await orig.call(this, p);
  claims.push({ sent, done: performance.now(), limit: p.limit, got: jobs.length, lapsed: p.includeLapsed });
  return jobs;
};
const schema = 'spiketrace';

await import("/work/main/node_modules/pg/lib/index.js").then(async ({ default: pg }) => { const c = new pg.Client("postgres://root@127.0.0.1:5432/test"); await c.connect(); await c.query(`drop schema if exists ${schema} cascade`); await c.end(); });
const docket = await Docket.open({ url: 'postgres://root@127.0.0.1:5432/test', schema });
let started = 0; let lastStart = 0; const starts = [];
docket.handle('noop', async () => { starts.push(performance.now()); started += 1; });
const opts = variant === 'tuned' ? { concurrency: 24, prefetch: 500 } : variant === 'one' ? { concurrency: 24, maxConcurrentClaims: 1 } : variant === 'tuned1' ? { concurrency: 24, prefetch: 500, maxConcurrentClaims: 1 } : { concurrency: 24 };
const worker = docket.worker(opts);
await worker.start();
await new Promise((r) => setTimeout(r, 500));
const dueAt = new Date(Date.now() + 3000);
const specs = Array.from({ length: n }, () => ({ kind: 'noop', payload: {}, runAt: dueAt }));
for (let i = 0; i < n; i += 1000) await docket.submitMany(specs.slice(i, i + 1000));
const dueMono = performance.now() + (dueAt.getTime() - Date.now());
while (started < n) await new Promise((r) => setTimeout(r, 20));
const rel = (t) => (t - dueMono).toFixed(1);
console.log(`${variant}: last start ${rel(Math.max(...starts))} ms, first ${rel(Math.min(...starts))}; claims ${claims.length}`);
for (const c of claims.filter((c) => c.done > dueMono - 50).slice(0, Number(process.env.SHOW ?? 40))) console.log(`  sent ${rel(c.sent)} done ${rel(c.done)} rtt ${(c.done - c.sent).toFixed(1)} limit ${c.limit} got ${c.got}${c.lapsed ? ' +lapsed' : ''}`);
await worker.stop?.();
await docket.close();
if (process.env.COMPLETIONS) {
  const { completions } = await import('./patch-complete.scratch.mjs');
  const inSpike = completions.filter((c) => c.done > dueMono - 50);
  const sizes = inSpike.map((c) => c.n).sort((a, b) => a - b);
  console.log(`completions in spike: ${inSpike.length} batches, sizes min ${sizes[0]} median ${sizes[sizes.length >> 1]} max ${sizes.at(-1)}, sum ${sizes.reduce((a, b) => a + b, 0)}; rtt median ${inSpike.map((c) => c.done - c.sent).sort((a, b) => a - b)[inSpike.length >> 1]?.toFixed(1)}`);
}
