/**
 * Hand-written SVG charts for RESULTS.md: a latency CDF with one line per system (log-scaled x) and
 * a bar histogram for the spike's start times. No chart dependency: a few dozen lines of SVG are
 * easier to trust than a library.
 */

const WIDTH = 720;
const HEIGHT = 360;
const MARGIN = { top: 30, right: 180, bottom: 45, left: 60 };
const COLORS = ['#1b6ac9', '#d9480f', '#2b8a3e', '#862e9c', '#c92a2a', '#e67700', '#0b7285', '#495057'];

function escapeXml(text: string): string {
  return text.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]!);
}

function frame(title: string, body: string): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="11">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="18" font-size="13" font-weight="bold">${escapeXml(title)}</text>`,
    body,
    '</svg>',
    '',
  ].join('\n');
}

/** One line of a CDF chart: a label and (value, cumulative fraction) points. */
export interface CdfSeries {
  label: string;
  points: [number, number][];
}

/** A CDF chart with a log10 x axis (values ≤ 0 are drawn at the left edge). */
export function cdfChart(title: string, xLabel: string, series: readonly CdfSeries[]): string {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const all = series.flatMap((s) => s.points.map((p) => p[0])).filter((v) => v > 0);
  const minLog = Math.floor(Math.log10(all.length > 0 ? Math.min(...all) : 0.1));
  const maxLog = Math.ceil(Math.log10(all.length > 0 ? Math.max(...all) : 10));
  const span = Math.max(1, maxLog - minLog);
  const x = (v: number) => MARGIN.left + ((Math.log10(Math.max(v, 10 ** minLog)) - minLog) / span) * plotW;
  const y = (f: number) => MARGIN.top + (1 - f) * plotH;
  const parts: string[] = [];
  for (let e = minLog; e <= minLog + span; e += 1) {
    const px = x(10 ** e);
    parts.push(`<line x1="${px}" y1="${MARGIN.top}" x2="${px}" y2="${MARGIN.top + plotH}" stroke="#ddd"/>`);
    parts.push(
      `<text x="${px}" y="${MARGIN.top + plotH + 15}" text-anchor="middle">${10 ** e >= 1 ? 10 ** e : (10 ** e).toFixed(-e)}</text>`,
    );
  }
  for (const f of [0, 0.5, 0.9, 0.99, 1]) {
    parts.push(`<line x1="${MARGIN.left}" y1="${y(f)}" x2="${MARGIN.left + plotW}" y2="${y(f)}" stroke="#eee"/>`);
    parts.push(`<text x="${MARGIN.left - 5}" y="${y(f) + 4}" text-anchor="end">${f}</text>`);
  }
  parts.push(
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 8}" text-anchor="middle">${escapeXml(xLabel)} (log scale)</text>`,
  );
  series.forEach((s, n) => {
    const color = COLORS[n % COLORS.length]!;
    const d = s.points.map((p, k) => `${k === 0 ? 'M' : 'L'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
    if (d) parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.8"/>`);
    const ly = MARGIN.top + 10 + n * 16;
    parts.push(
      `<line x1="${WIDTH - MARGIN.right + 12}" y1="${ly}" x2="${WIDTH - MARGIN.right + 30}" y2="${ly}" stroke="${color}" stroke-width="3"/>`,
    );
    parts.push(`<text x="${WIDTH - MARGIN.right + 35}" y="${ly + 4}">${escapeXml(s.label)}</text>`);
  });
  return frame(title, parts.join('\n'));
}

/** One bar series of a histogram chart. */
export interface HistogramSeries {
  label: string;
  counts: number[];
}

/**
 * Start-time histograms over [fromMs, toMs) relative to the due instant, one small panel per system
 * stacked vertically, with the due instant marked: any bar left of it is an early start.
 */
export function spikeChart(title: string, fromMs: number, toMs: number, series: readonly HistogramSeries[]): string {
  const panelH = 70;
  const height = MARGIN.top + series.length * (panelH + 18) + 35;
  const plotW = WIDTH - MARGIN.left - 40;
  const parts: string[] = [];
  series.forEach((s, n) => {
    const top = MARGIN.top + n * (panelH + 18) + 14;
    const peak = Math.max(1, ...s.counts);
    const barW = plotW / Math.max(1, s.counts.length);
    parts.push(`<text x="${MARGIN.left}" y="${top - 3}">${escapeXml(s.label)} (peak bin ${peak})</text>`);
    parts.push(
      `<line x1="${MARGIN.left}" y1="${top + panelH}" x2="${MARGIN.left + plotW}" y2="${top + panelH}" stroke="#999"/>`,
    );
    s.counts.forEach((count, k) => {
      if (count === 0) return;
      const h = (count / peak) * panelH;
      parts.push(
        `<rect x="${(MARGIN.left + k * barW).toFixed(1)}" y="${(top + panelH - h).toFixed(1)}" width="${Math.max(0.8, barW - 0.4).toFixed(1)}" height="${h.toFixed(1)}" fill="${COLORS[n % COLORS.length]}"/>`,
      );
    });
    const zero = MARGIN.left + ((0 - fromMs) / (toMs - fromMs)) * plotW;
    parts.push(
      `<line x1="${zero}" y1="${top - 2}" x2="${zero}" y2="${top + panelH}" stroke="#c92a2a" stroke-dasharray="3,2"/>`,
    );
  });
  const axisY = height - 30;
  for (let k = 0; k <= 10; k += 1) {
    const v = fromMs + ((toMs - fromMs) * k) / 10;
    const px = MARGIN.left + (plotW * k) / 10;
    parts.push(`<text x="${px}" y="${axisY}" text-anchor="middle">${Math.round(v)}</text>`);
  }
  parts.push(
    `<text x="${MARGIN.left + plotW / 2}" y="${height - 10}" text-anchor="middle">handler start minus due time (ms); dashed red line = due instant</text>`,
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${WIDTH}" height="${height}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="18" font-size="13" font-weight="bold">${escapeXml(title)}</text>`,
    parts.join('\n'),
    '</svg>',
    '',
  ].join('\n');
}

/** One line of a time-series chart: a label and (seconds, value) points. */
export interface TimeSeries {
  label: string;
  points: [number, number][];
}

/** A line chart over time with linear axes from 0 (the soak's sizes, claim times and RSS). */
export function timeSeriesChart(title: string, yLabel: string, series: readonly TimeSeries[]): string {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const points = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]));
  const maxX = Math.max(1, ...points.map((p) => p[0]));
  const maxY = Math.max(Number.MIN_VALUE, ...points.map((p) => p[1])) * 1.05 || 1;
  const x = (v: number) => MARGIN.left + (v / maxX) * plotW;
  const y = (v: number) => MARGIN.top + (1 - v / maxY) * plotH;
  const parts: string[] = [];
  for (let k = 0; k <= 4; k += 1) {
    const value = (maxY * k) / 4;
    parts.push(
      `<line x1="${MARGIN.left}" y1="${y(value)}" x2="${MARGIN.left + plotW}" y2="${y(value)}" stroke="#eee"/>`,
      `<text x="${MARGIN.left - 5}" y="${y(value) + 4}" text-anchor="end">${Number(value.toPrecision(3))}</text>`,
    );
    const at = (maxX * k) / 4;
    parts.push(
      `<text x="${x(at)}" y="${MARGIN.top + plotH + 15}" text-anchor="middle">${Math.round(at / 60)} min</text>`,
    );
  }
  parts.push(
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 8}" text-anchor="middle">time since the soak started</text>`,
    `<text x="14" y="${MARGIN.top + plotH / 2}" transform="rotate(-90 14 ${MARGIN.top + plotH / 2})" text-anchor="middle">${escapeXml(yLabel)}</text>`,
  );
  series.forEach((s, n) => {
    const color = COLORS[n % COLORS.length]!;
    const d = s.points
      .filter((p) => Number.isFinite(p[1]))
      .map((p, k) => `${k === 0 ? 'M' : 'L'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`)
      .join(' ');
    if (d) parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.8"/>`);
    const ly = MARGIN.top + 10 + n * 16;
    parts.push(
      `<line x1="${WIDTH - MARGIN.right + 12}" y1="${ly}" x2="${WIDTH - MARGIN.right + 30}" y2="${ly}" stroke="${color}" stroke-width="3"/>`,
      `<text x="${WIDTH - MARGIN.right + 35}" y="${ly + 4}">${escapeXml(s.label)}</text>`,
    );
  });
  return frame(title, parts.join('\n'));
}
