import { readFileSync, readdirSync } from 'node:fs';
const dir = process.argv[2]!;
const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
const p = JSON.parse(readFileSync(`${dir}/${file}`, 'utf8'));
const byId = new Map<number, any>();
for (const n of p.nodes) byId.set(n.id, n);
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const total = p.samples.length;
const self = new Map<string, number>();
const incl = new Map<string, number>();
const counts = new Map<number, number>();
for (const s of p.samples) counts.set(s, (counts.get(s) ?? 0) + 1);
for (const [id, c] of counts) {
  const n = byId.get(id);
  const key = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/.*\/(src|node_modules)\//, '$1/')}:${n.callFrame.lineNumber}`;
  self.set(key, (self.get(key) ?? 0) + c);
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const m = byId.get(cur);
    const k = `${m.callFrame.functionName || '(anon)'} ${m.callFrame.url.replace(/.*\/(src|node_modules)\//, '$1/')}:${m.callFrame.lineNumber}`;
    if (seen.has(k)) continue;
    seen.add(k);
    incl.set(k, (incl.get(k) ?? 0) + c);
  }
}
const top = (m: Map<string, number>, k: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k).map(([n, c]) => `${((100 * c) / total).toFixed(1).padStart(5)}% ${n}`).join('\n');
console.log('SELF\n' + top(self, 30));
console.log('INCLUSIVE\n' + top(incl, 45));
