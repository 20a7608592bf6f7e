/**
 * The dashboard's one style sheet, served as `assets/<version>/style.css` (the CSP allows no
 * inline style). Light by default, dark under `prefers-color-scheme: dark`; colours are
 * custom properties so both schemes keep the same contrast ratios (≥ 4.5:1 for text, checked
 * by axe-core in test/browser/).
 */
export const DASHBOARD_STYLE = `
:root {
  color-scheme: light dark;
  --bg: #f7f7f5; --panel: #ffffff; --text: #1c1d1f; --muted: #55595f; --line: #d5d7db;
  --accent: #1f5fbf; --accent-text: #ffffff; --danger: #b3261e; --ok: #1b7a3a; --warn: #8a5a00;
  --focus: #ffbf47; --chart-a: #1f5fbf; --chart-b: #b3261e; --chart-c: #1b7a3a; --chart-d: #8a5a00;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #141518; --panel: #1d1f23; --text: #e8e9eb; --muted: #a9adb4; --line: #3a3d43;
    --accent: #7fb0ff; --accent-text: #0b1220; --danger: #ff8a80; --ok: #6fd58e; --warn: #f0c36b;
    --chart-a: #7fb0ff; --chart-b: #ff8a80; --chart-c: #6fd58e; --chart-d: #f0c36b;
  }
}
* { box-sizing: border-box; }
/* The hidden attribute wins over the display rules below (a label is flex). */
[hidden] { display: none !important; }
body { margin: 0; background: var(--bg); color: var(--text); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -999px; top: 0; background: var(--panel); padding: .5rem; }
.skip:focus { left: .5rem; }
.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1rem; padding: .5rem 1rem;
  background: var(--panel); border-bottom: 1px solid var(--line); }
.brand { font-weight: 700; font-size: 1.1rem; }
nav ul { display: flex; flex-wrap: wrap; gap: .25rem; list-style: none; margin: 0; padding: 0; }
nav a { display: inline-block; padding: .35rem .6rem; border-radius: 6px; text-decoration: none; color: var(--text); }
nav a[aria-current="page"] { background: var(--accent); color: var(--accent-text); }
.live { margin-left: auto; color: var(--muted); font-size: .85rem; }
main { padding: 1rem; max-width: 1400px; margin: 0 auto; }
main:focus { outline: none; }
h1 { font-size: 1.4rem; margin: 0 0 .75rem; }
h2 { font-size: 1.1rem; margin: 1.25rem 0 .5rem; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; margin-bottom: 1rem; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 1rem; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; background: var(--panel); }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: .85rem; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: .5rem; overflow: auto;
  max-height: 24rem; white-space: pre-wrap; word-break: break-word; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; border: 1px solid var(--line); font-size: .8rem; }
.badge.paused, .badge.dead, .badge.failed { color: var(--danger); border-color: var(--danger); }
.badge.running, .badge.done, .badge.live { color: var(--ok); border-color: var(--ok); }
.badge.scheduled, .badge.pending { color: var(--warn); border-color: var(--warn); }
form.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; }
label { display: flex; flex-direction: column; gap: .15rem; font-size: .85rem; color: var(--muted); }
input, select, button { font: inherit; color: var(--text); background: var(--panel); border: 1px solid var(--line);
  border-radius: 6px; padding: .3rem .5rem; min-height: 2.2rem; }
button { cursor: pointer; }
button.primary { background: var(--accent); color: var(--accent-text); border-color: var(--accent); }
button.danger { color: var(--danger); border-color: var(--danger); }
button:disabled { opacity: .6; cursor: not-allowed; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .5rem 0; }
.muted { color: var(--muted); }
.error { color: var(--danger); font-weight: 600; }
.notice { border-left: 4px solid var(--accent); padding: .5rem .75rem; background: var(--panel); margin: .5rem 0; }
dl.fields { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0; }
dl.fields dt { color: var(--muted); }
dl.fields dd { margin: 0; word-break: break-word; }
dialog { background: var(--panel); color: var(--text); border: 1px solid var(--line); border-radius: 10px; max-width: min(32rem, 92vw); }
dialog::backdrop { background: rgb(0 0 0 / .45); }
progress { width: 100%; height: 1.2rem; accent-color: var(--accent); }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart .axis { stroke: var(--line); }
svg.chart text { fill: var(--muted); font-size: 11px; }
svg.chart .s0 { stroke: var(--chart-a); } svg.chart .s1 { stroke: var(--chart-b); }
svg.chart .s2 { stroke: var(--chart-c); } svg.chart .s3 { stroke: var(--chart-d); }
svg.chart polyline { fill: none; stroke-width: 2; }
svg.chart circle.s0 { fill: var(--chart-a); } svg.chart circle.s1 { fill: var(--chart-b); }
svg.chart circle.s2 { fill: var(--chart-c); } svg.chart circle.s3 { fill: var(--chart-d); }
svg.chart circle { stroke: none; }
.legend { display: flex; flex-wrap: wrap; gap: .75rem; list-style: none; padding: 0; margin: .25rem 0 0; font-size: .85rem; }
.legend .swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; margin-right: .3rem; vertical-align: -1px; }
.legend .s0 .swatch { background: var(--chart-a); } .legend .s1 .swatch { background: var(--chart-b); }
.legend .s2 .swatch { background: var(--chart-c); } .legend .s3 .swatch { background: var(--chart-d); }
.trend-up { color: var(--danger); } .trend-down { color: var(--ok); }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
@media (max-width: 640px) {
  main { padding: .5rem; }
  th, td { padding: .3rem .4rem; }
  .hide-narrow { display: none; }
  form.filters label { flex: 1 1 45%; }
}
`;
