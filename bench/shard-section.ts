/** The shard benchmark's section of RESULTS.md: its markers, and how it is found and replaced. */

/** Markers around the shard section in RESULTS.md: the main report carries it over unchanged. */
export const SHARD_SECTION_BEGIN = '<!-- shards:begin (npm run bench -- --shards) -->';
export const SHARD_SECTION_END = '<!-- shards:end -->';

/** `md` with its shard section replaced by `section` (appended when it has none). */
export function withShardSection(md: string, section: string): string {
  const begin = md.indexOf(SHARD_SECTION_BEGIN);
  const end = md.indexOf(SHARD_SECTION_END);
  if (begin >= 0 && end > begin) {
    return `${md.slice(0, begin)}${section}${md.slice(end + SHARD_SECTION_END.length)}`;
  }
  return `${md.trimEnd()}\n\n${section}\n`;
}

/** The section of an existing RESULTS.md, markers included; empty when it has none. */
export function existingShardSection(md: string): string {
  const begin = md.indexOf(SHARD_SECTION_BEGIN);
  const end = md.indexOf(SHARD_SECTION_END);
  return begin >= 0 && end > begin ? md.slice(begin, end + SHARD_SECTION_END.length) : '';
}
