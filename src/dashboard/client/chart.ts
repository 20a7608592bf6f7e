/**
 * Line charts as inline SVG, drawn here (no chart library): a fixed viewBox scaled by CSS, one
 * polyline per series, colours from the style sheet's classes (`s0`…`s3`: no inline style), and
 * a text summary for screen readers in the chart's `aria-label` and legend.
 */
import { el, svg } from './dom.js';

/** One point: time (ms since epoch) and value. */
export interface Point {
  t: number;
  v: number;
}

/** A named series. */
export interface Series {
  name: string;
  points: readonly Point[];
}

const WIDTH = 600;
const HEIGHT = 180;
const PAD = { left: 48, right: 8, top: 8, bottom: 22 };

/** A round upper bound for the y axis: 1, 2, 5 × 10^n. */
function niceMax(value: number): number {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

function clock(t: number): string {
  const date = new Date(t);
  return `${String(date.getHours()).padStart(2, '0')}:${String(date.getMinutes()).padStart(2, '0')}`;
}

/** A chart of `series` between `from` and `to` (ms), values shown with `unit`. */
export function lineChart(
  title: string,
  series: readonly Series[],
  from: number,
  to: number,
  unit: string,
): HTMLElement {
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.points.map((p) => p.v))));
  const span = Math.max(1, to - from);
  const x = (t: number) => PAD.left + ((t - from) / span) * (WIDTH - PAD.left - PAD.right);
  const y = (v: number) => HEIGHT - PAD.bottom - (v / max) * (HEIGHT - PAD.top - PAD.bottom);
  const latest = series.map((s) => `${s.name} ${format(s.points.at(-1)?.v ?? 0)} ${unit}`).join(', ');
  const chart = svg(
    'svg',
    { class: 'chart', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': `${title}: latest ${latest}` },
    svg('line', { class: 'axis', x1: PAD.left, y1: y(0), x2: WIDTH - PAD.right, y2: y(0) }),
    svg('line', { class: 'axis', x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: y(0) }),
    svg('text', { x: PAD.left - 4, y: PAD.top + 10, 'text-anchor': 'end' }, format(max)),
    svg('text', { x: PAD.left - 4, y: y(0), 'text-anchor': 'end' }, '0'),
    svg('text', { x: PAD.left, y: HEIGHT - 4 }, clock(from)),
    svg('text', { x: WIDTH - PAD.right, y: HEIGHT - 4, 'text-anchor': 'end' }, clock(to)),
    // Dots on the non-zero points as well as lines: a busy minute between idle ones is a single point.
    ...series.flatMap((s, i) =>
      s.points
        .filter((p) => p.v > 0)
        .map((p) => svg('circle', { class: `s${i % 4}`, cx: x(p.t).toFixed(1), cy: y(p.v).toFixed(1), r: 2.5 })),
    ),
    ...series.map((s, i) =>
      svg('polyline', {
        class: `s${i % 4}`,
        points: s.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' '),
      }),
    ),
  );
  return el(
    'figure',
    { class: 'panel' },
    el('figcaption', {}, el('strong', {}, title), ` (${unit})`),
    chart,
    el(
      'ul',
      { class: 'legend' },
      ...series.map((s, i) =>
        el(
          'li',
          { class: `s${i % 4}` },
          el('span', { class: 'swatch', 'aria-hidden': 'true' }),
          `${s.name}: ${format(s.points.at(-1)?.v ?? 0)}`,
        ),
      ),
    ),
  );
}

/** A number in at most 3 significant digits (1.23k, 45.6). */
export function format(value: number): string {
  if (!Number.isFinite(value)) return '–';
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${(value / 1e6).toPrecision(3)}M`;
  if (abs >= 1e4) return `${(value / 1e3).toPrecision(3)}k`;
  if (Number.isInteger(value)) return String(value);
  return value.toPrecision(3);
}
