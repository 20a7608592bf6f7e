/**
 * Re-renders a report from the JSON a run wrote, so a change to the report does not need the run
 * again: `npx tsx bench/rerender.ts <results.json | soak.json> [out dir]`. A bench's results.json
 * gives RESULTS.md and its charts; a soak's soak.json gives SOAK.md and its charts, with the
 * flatness verdicts judged again by the current rules.
 */
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { type BenchResults, writeReport } from './report.js';
import { judgeFlatness, type SoakResult, writeSoakReport } from './soak.js';

const [input, out] = process.argv.slice(2);
if (!input) throw new Error('usage: npx tsx bench/rerender.ts <results.json | soak.json> [out dir]');
const parsed = JSON.parse(readFileSync(input, 'utf8')) as BenchResults | SoakResult;
const outDir = out ?? dirname(input);
if ('samples' in parsed) {
  const soak = parsed;
  // A soak.json written before samples carried `afterOffer`: its last sample is the end state by
  // construction (the soak takes it after the last jobs started, and no sample after it).
  const last = soak.samples.at(-1);
  if (last && !soak.samples.some((sample) => sample.afterOffer)) last.afterOffer = true;
  soak.flatness = judgeFlatness(soak.samples, soak.options);
  console.log(writeSoakReport(soak, outDir).join('\n'));
} else {
  console.log(writeReport(parsed, outDir).join('\n'));
}
