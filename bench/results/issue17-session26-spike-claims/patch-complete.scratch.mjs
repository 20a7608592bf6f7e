import { PostgresStore } from '/work/main/src/store/postgres/postgres-store.ts';
export const completions = [];
const orig = PostgresStore.prototype.jobCompleteMany;
PostgresStore.prototype.jobCompleteMany = async function (p) {
  const sent = performance.now();
  const r = await orig.call(this, p);
  completions.push({ sent, done: performance.now(), n: p.leases.length, keys: Object.keys(p).join(',') });
  return r;
};
