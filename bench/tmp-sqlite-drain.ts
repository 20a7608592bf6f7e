import { rmSync } from 'node:fs';
const dir = process.argv[2]!;
const n = Number(process.argv[3] ?? 50000);
const { Docket } = await import(`${dir}/src/docket.ts`);
const file = `/tmp/sqlite-drain-${process.pid}.db`;
const docket = await Docket.open({ url: `sqlite:${file}` });
if (process.env.PRAGMAS) for (const p of process.env.PRAGMAS.split(';')) (docket.store as any).db.pragma(p);
if (process.env.DROP) {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(file);
  for (const ix of process.env.DROP.split(',')) db.exec(`DROP INDEX ${ix}`);
  db.close();
}
for (let i = 0; i < n; i += 1000) {
  await docket.submitMany(Array.from({ length: 1000 }, (_, j) => ({ kind: 'noop', payload: { i: i + j } })));
}
let done = 0;
let finish: () => void;
const all = new Promise<void>((r) => (finish = r));
docket.handle('noop', async () => {
  done += 1;
  if (done === n) finish();
});
const worker = docket.worker({ concurrency: 24 });
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await worker.start();
await all;
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ dir, n, jobsPerSec: Math.round(n / (ms / 1000)), cpuUsPerJob: +((cpu.user + cpu.system) / n).toFixed(1) }));
await worker.stop();
await docket.close();
for (const s of ['', '-wal', '-shm']) rmSync(file + s, { force: true });
