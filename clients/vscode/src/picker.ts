// Pure formatting of Backstory results into QuickPick entries. No "vscode" import: unit-tested with node --test.
import type { Hunk, Lanes, PriorArtResult, ResultItem, SearchResult, SymbolHistory } from "./protocol";

export interface PickEntry {
  kind: "item" | "separator";
  label: string;
  description?: string;
  detail?: string;
  /** What to open when the entry is chosen. */
  target?: CommitTarget;
}

export interface CommitTarget {
  sha: string;
  shortSha: string;
  subject: string;
  /** Path of the hunk that matched best, to scroll to. */
  path?: string;
  newStart?: number;
  provenance: string;
}

const UNITS: [number, string][] = [
  [60, "second"],
  [60, "minute"],
  [24, "hour"],
  [7, "day"],
];

/** "just now", "5 minutes ago", "yesterday", "3 days ago", "2 weeks ago", "4 months ago", "2 years ago". */
export function relativeDate(iso: string | undefined | null, now: Date = new Date()): string {
  if (!iso) return "";
  const then = new Date(iso);
  if (Number.isNaN(then.getTime())) return "";
  let seconds = Math.round((now.getTime() - then.getTime()) / 1000);
  const future = seconds < 0;
  seconds = Math.abs(seconds);
  if (seconds < 45) return "just now";
  const days = seconds / 86400;
  const say = (n: number, unit: string) => {
    const s = `${n} ${unit}${n === 1 ? "" : "s"}`;
    return future ? `in ${s}` : `${s} ago`;
  };
  if (!future && days >= 1 && days < 2) return "yesterday";
  if (days >= 365) return say(Math.max(1, Math.floor(days / 365.25)), "year");
  if (days >= 30) return say(Math.max(1, Math.floor(days / 30.44)), "month");
  if (days >= 14) return say(Math.floor(days / 7), "week");
  let value = seconds;
  for (const [size, unit] of UNITS) {
    if (value < size) return say(Math.max(1, Math.round(value)), unit);
    value = value / size;
  }
  return say(Math.floor(days), "day");
}

/** "src/http.py:10-21" (new side; old side for deletions). */
export function hunkLocation(h: Hunk): string {
  const deleted = h.change === "delete" || (h.new_lines === 0 && (h.old_lines ?? 0) > 0);
  const start = deleted ? h.old_start : h.new_start;
  const count = deleted ? h.old_lines : h.new_lines;
  const path = deleted ? (h.old_path ?? h.path) : h.path;
  if (start === undefined || start === null) return path;
  if (!count || count <= 1) return `${path}:${start}`;
  return `${path}:${start}-${start + count - 1}`;
}

function bestRank(lanes: Lanes | undefined): number {
  let best = Number.POSITIVE_INFINITY;
  for (const v of Object.values(lanes ?? {})) if (typeof v === "number" && v < best) best = v;
  return best;
}

/** The hunk that explains the match best: the best-ranked one in any lane, else the first. */
export function primaryHunk(item: ResultItem): Hunk | undefined {
  const hunks = item.hunks ?? [];
  let best: Hunk | undefined;
  let bestScore = Number.POSITIVE_INFINITY;
  for (const h of hunks) {
    const r = bestRank(h.lanes);
    if (r < bestScore) {
      best = h;
      bestScore = r;
    }
  }
  return best ?? hunks[0];
}

/** "diff #1, message #2, dense #1": lanes that found the commit, best rank first. */
export function formatLanes(lanes: Lanes | undefined): string {
  return Object.entries(lanes ?? {})
    .filter((e): e is [string, number] => typeof e[1] === "number")
    .sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]))
    .map(([lane, rank]) => `${lane} #${rank}`)
    .join(", ");
}

/** Why a result matched: "EXACT · changed `f`" or "INFERRED · diff #1, message #2 · rerank 0.71 · learned 0.83". */
export function formatWhy(item: ResultItem, symbolName?: string): string {
  const provenance = (item.provenance ?? "INFERRED").toUpperCase();
  const parts = [provenance];
  if (provenance === "EXACT") {
    const name = symbolName ?? primaryHunk(item)?.symbols?.[0]?.name;
    parts.push(name ? `changed \`${name}\`` : "symbol history");
  }
  const lanes = formatLanes(item.why?.lanes);
  if (lanes) parts.push(lanes);
  if (typeof item.why?.rerank === "number") parts.push(`rerank ${item.why.rerank.toFixed(2)}`);
  if (typeof item.why?.learned === "number") parts.push(`learned ${item.why.learned.toFixed(2)}`);
  return parts.join(" · ");
}

export function shortSha(item: ResultItem): string {
  return item.commit.short_sha ?? item.commit.sha.slice(0, 7);
}

export function resultEntry(item: ResultItem, now: Date = new Date(), symbolName?: string): PickEntry {
  const c = item.commit;
  const hunk = primaryHunk(item);
  const description = [shortSha(item), c.author?.name, relativeDate(c.date ?? c.commit_date, now)]
    .filter((s) => !!s)
    .join(" · ");
  const files = new Set((item.hunks ?? []).map((h) => h.path));
  let where = hunk ? hunkLocation(hunk) : "";
  if (where && files.size > 1) where += ` (+${files.size - 1} more file${files.size > 2 ? "s" : ""})`;
  const detail = [where, formatWhy(item, symbolName)].filter((s) => !!s).join(" · ");
  return {
    kind: "item",
    label: c.subject || "(no subject)",
    description,
    detail,
    target: {
      sha: c.sha,
      shortSha: shortSha(item),
      subject: c.subject ?? "",
      path: hunk?.path,
      newStart: hunk?.new_start,
      provenance: (item.provenance ?? "INFERRED").toUpperCase(),
    },
  };
}

function separator(label: string): PickEntry {
  return { kind: "separator", label };
}

/** The EXACT commits of a prior-art answer, whether `exact` is the symbol-history object or a list. */
export function exactItems(res: PriorArtResult): ResultItem[] {
  const exact = res.exact;
  if (!exact) return [];
  const items = Array.isArray(exact) ? exact : (exact.commits ?? []);
  return items.map((i) => ({ ...i, provenance: i.provenance ?? "EXACT" }));
}

export function priorArtEntries(res: PriorArtResult, now: Date = new Date()): PickEntry[] {
  const symbolName =
    res.symbol?.name ?? (res.exact && !Array.isArray(res.exact) ? res.exact.symbol?.name : undefined) ?? undefined;
  const exact = exactItems(res);
  const seen = new Set(exact.map((i) => i.commit.sha));
  const related = (res.results ?? []).filter((i) => !seen.has(i.commit.sha));
  const out: PickEntry[] = [];
  if (exact.length) {
    out.push(separator(symbolName ? `History of ${symbolName}` : "Exact history"));
    out.push(...exact.map((i) => resultEntry(i, now, symbolName)));
  }
  if (related.length) {
    if (exact.length) out.push(separator("Related elsewhere"));
    out.push(...related.map((i) => resultEntry(i, now)));
  }
  return out;
}

export function historyEntries(res: SymbolHistory, now: Date = new Date()): PickEntry[] {
  const name = res.symbol?.name;
  return (res.commits ?? []).map((i) => resultEntry({ ...i, provenance: i.provenance ?? "EXACT" }, now, name));
}

export function searchEntries(res: SearchResult, now: Date = new Date()): PickEntry[] {
  return (res.results ?? []).map((i) => resultEntry(i, now));
}

/** A sentence for an answer with nothing to pick: the server's hint or message when it gave one. */
export function emptyMessage(what: string, res: { _meta?: { hint?: string | null }; message?: string | null }): string {
  const why = res.message ?? res._meta?.hint;
  return why ? `Backstory: no ${what}. ${why}` : `Backstory: no ${what}.`;
}

/**
 * The 0-based line of `text` to scroll to for a commit opened from a result: the hunk header of the hunk
 * that matched (same path and new_start), else the first hunk of that path, else the first hunk, else 0.
 */
export function hunkLine(
  hunks: { path: string; new_start?: number; line: number }[] | undefined,
  path?: string,
  newStart?: number,
): number {
  const list = hunks ?? [];
  const exact = list.find((h) => h.path === path && newStart !== undefined && h.new_start === newStart);
  if (exact) return exact.line;
  const samePath = list.filter((h) => h.path === path);
  if (samePath.length && newStart !== undefined) {
    // the closest hunk of that file
    const byDistance = [...samePath].sort(
      (a, b) => Math.abs((a.new_start ?? 0) - newStart) - Math.abs((b.new_start ?? 0) - newStart),
    );
    return byDistance[0].line;
  }
  if (samePath.length) return samePath[0].line;
  return list[0]?.line ?? 0;
}
