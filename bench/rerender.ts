/**
 * Re-renders RESULTS.md and the charts from a results.json a run wrote, so a change to the report
 * does not need the run again: `npx tsx bench/rerender.ts <results.json> [out dir]`.
 */
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { type BenchResults, writeReport } from './report.js';

const [input, out] = process.argv.slice(2);
if (!input) throw new Error('usage: npx tsx bench/rerender.ts <results.json> [out dir]');
const bench = JSON.parse(readFileSync(input, 'utf8')) as BenchResults;
console.log(writeReport(bench, out ?? dirname(input)).join('\n'));
