/**
 * Submits after a quiet spell: what a web app with little traffic sees. One job every `--gap-ms`
 * (default 12,000, longer than pg-pool's 10 s idle timeout), each a single `submit()`, into a
 * default worker; printed per tree: the submit call's time and enqueue-to-start (submit called to
 * handler started), median and max over `--submits` jobs (the first, which also opens connections,
 * is left out).
 *
 *   npx tsx bench/quiet-submits.ts --baseline /tmp/docket-main [--gap-ms 12000] [--submits 6]
 *
 * The two trees run at the same time, each in its own child process, the baseline's submits half a
 * gap after this tree's, so both see the same machine and neither's traffic warms the other's
 * connections. Each child opens two Dockets on its own schema (one submits, one runs the worker,
 * as a web process and a worker process would) with separate connection pools. Needs PostgreSQL at
 * DOCKET_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/test).
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { importDocket, THIS_CHECKOUT } from './checkouts.js';
import { median } from './stats.js';

const CHILD = 'child';
const KIND = 'bench.quiet';
const url = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface ChildResult {
  submitMs: number[];
  startMs: number[];
}

if (process.argv[2] === CHILD) {
  await runChild(
    process.argv[3] ?? '',
    process.argv[4] ?? '',
    Number(process.argv[5]),
    Number(process.argv[6]),
    Number(process.argv[7]),
  );
} else {
  await runParent();
}

async function runParent(): Promise<void> {
  const { values } = parseArgs({
    options: {
      baseline: { type: 'string' },
      'gap-ms': { type: 'string', default: '12000' },
      submits: { type: 'string', default: '6' },
    },
  });
  if (!values.baseline) throw new Error('--baseline DIR (a checkout of Docket with node_modules) is required');
  for (const [name, value] of [
    ['--gap-ms', values['gap-ms']],
    ['--submits', values.submits],
  ] as const) {
    if (!/^[1-9]\d*$/.test(value)) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(value)}`);
  }
  const gapMs = Number(values['gap-ms']);
  const submits = Number(values.submits);
  if (submits < 2) throw new Error('--submits must be at least 2 (the first is left out)');
  const trees = [
    { name: 'this', dir: THIS_CHECKOUT, offsetMs: 0 },
    { name: 'baseline', dir: resolve(values.baseline), offsetMs: Math.round(gapMs / 2) },
  ];
  const results = await Promise.all(
    trees.map(
      (tree) =>
        new Promise<ChildResult>((resolveRun, reject) => {
          const schema = `quiet_${tree.name}_${process.pid}`;
          const child = spawn(
            process.execPath,
            [
              '--import',
              'tsx',
              fileURLToPath(import.meta.url),
              CHILD,
              tree.dir,
              schema,
              String(gapMs),
              String(submits),
              String(tree.offsetMs),
            ],
            { cwd: tree.dir, stdio: ['ignore', 'pipe', 'inherit'] },
          );
          let out = '';
          child.stdout.on('data', (chunk: Buffer) => {
            out += chunk.toString();
          });
          child.on('exit', (code) => {
            const line = out.trim().split('\n').at(-1) ?? '';
            if (code !== 0 || !line.startsWith('{')) reject(new Error(`${tree.name} failed (exit ${code}): ${out}`));
            else resolveRun(JSON.parse(line) as ChildResult);
          });
        }),
    ),
  );
  const show = (values: number[]) => `median ${median(values).toFixed(1)} ms, max ${Math.max(...values).toFixed(1)} ms`;
  trees.forEach((tree, index) => {
    const result = results[index]!;
    console.log(
      `${tree.name.padEnd(8)} submit call: ${show(result.submitMs)}; enqueue-to-start: ${show(result.startMs)}`,
    );
    console.log(
      `${''.padEnd(8)} each (submit / start, ms): ${result.submitMs.map((ms, k) => `${ms.toFixed(1)}/${result.startMs[k]!.toFixed(1)}`).join(', ')}`,
    );
  });
  const [mine, theirs] = [median(results[0]!.startMs), median(results[1]!.startMs)];
  console.log(
    `enqueue-to-start median ratio this / baseline: ${(mine / theirs).toFixed(2)} (gap ${gapMs} ms, ${submits - 1} submits each)`,
  );
}

async function runChild(dir: string, schema: string, gapMs: number, submits: number, offsetMs: number): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const Docket = await importDocket(dir);
  const web = await Docket.open({ url, schema });
  const workerSide = await Docket.open({ url, schema });
  const result: ChildResult = { submitMs: [], startMs: [] };
  try {
    let calledAt = 0;
    let started: (at: number) => void = () => {};
    workerSide.handle(KIND, async () => started(performance.now()));
    const worker = workerSide.worker();
    await worker.start();
    await new Promise((resolveWait) => setTimeout(resolveWait, 1000 + offsetMs));
    for (let k = 0; k < submits; k += 1) {
      if (k > 0) await new Promise((resolveWait) => setTimeout(resolveWait, gapMs));
      const start = new Promise<number>((resolveStart) => {
        started = resolveStart;
      });
      calledAt = performance.now();
      await web.submit({ kind: KIND, payload: { k } });
      const submitMs = performance.now() - calledAt;
      const startMs = (await start) - calledAt;
      if (k === 0) continue; // opened the connections
      result.submitMs.push(submitMs);
      result.startMs.push(startMs);
    }
    await worker.stop();
  } finally {
    await workerSide.close();
    await web.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  }
  console.log(JSON.stringify(result));
}
