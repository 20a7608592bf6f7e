/** Formatting of instants and durations for people (the API speaks RFC 3339 and ms). */

/** An RFC 3339 instant as local date and time, with the ISO text kept for a title. */
export function when(iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '–';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

/** How far `iso` is from now: "in 3 min", "12 s ago". */
export function relative(iso: string | null | undefined, nowMs = Date.now()): string {
  if (iso === null || iso === undefined) return '';
  const deltaMs = new Date(iso).getTime() - nowMs;
  const abs = Math.abs(deltaMs);
  const text =
    abs < 60_000
      ? `${Math.round(abs / 1000)} s`
      : abs < 3_600_000
        ? `${Math.round(abs / 60_000)} min`
        : abs < 86_400_000
          ? `${Math.round(abs / 3_600_000)} h`
          : `${Math.round(abs / 86_400_000)} d`;
  return deltaMs >= 0 ? `in ${text}` : `${text} ago`;
}

/** A duration in ms as "850 ms", "1.2 s", "3 min". */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

/** A JSON value pretty-printed (shown with textContent, so markup in it stays text). */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? 'null';
}
