// Scratch: one fresh worker process drains a backlog already queued; prints its rate and CPU a job.
const [, , modPath, url, nText] = process.argv;
const N = Number(nText);
const { Docket } = await import(modPath);
const docket = await Docket.open({ url });
let started = 0, first = 0, cpu0;
docket.handle('bench.noop', async () => {
  started += 1;
  if (started === 1) { first = performance.now(); cpu0 = process.cpuUsage(); }
  if (started === N) {
    const c = process.cpuUsage(cpu0);
    console.log(JSON.stringify({ rate: N / ((performance.now() - first) / 1000), cpu: (c.user + c.system) / N }));
    process.exit(0);
  }
});
await docket.worker({ concurrency: 24, prefetch: 500 }).start();
