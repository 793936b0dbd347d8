// Pure formatting of Backstory results into picker entries and tree rows. No "vscode" import: unit-tested with
// node --test.
import { relativeDate } from "./age";
import type {
  ChangesResult,
  CommitInfo,
  Consequence,
  Hunk,
  Lanes,
  Meta,
  PriorArtResult,
  ResultItem,
  SearchResult,
  ShowCommitResult,
  SymbolHistory,
} from "./protocol";

export { relativeDate };

export interface PickEntry {
  kind: "item" | "separator" | "group";
  label: string;
  description?: string;
  detail?: string;
  /** What to open when the entry is chosen (items). */
  target?: CommitTarget;
  /** The entries a group opens as a second list (the exact history behind a prior-art answer). */
  group?: { title: string; entries: PickEntry[] };
}

export interface CommitTarget {
  sha: string;
  shortSha: string;
  subject: string;
  /** Path of the hunk that matched best, to scroll to. */
  path?: string;
  /** Its path before the commit (renames), for the left side of a diff. */
  oldPath?: string;
  newStart?: number;
  provenance: string;
  /** What became of the commit, as header lines for the commit view ("Later:  reverted 3 weeks later by …"). */
  fate?: string[];
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

export function shortSha(item: ResultItem): string {
  return item.commit.short_sha ?? item.commit.sha.slice(0, 7);
}

/** Where and why, in words: the server's reason ("similar change in src/x.py"), with the lines it changed. */
export function whyLine(item: ResultItem): string {
  const hunk = primaryHunk(item);
  const files = new Set((item.hunks ?? []).map((h) => h.path));
  const more = files.size > 1 ? ` (+${files.size - 1} more file${files.size > 2 ? "s" : ""})` : "";
  const where = hunk ? hunkLocation(hunk) : "";
  const reason = item.reason ?? "";
  if (reason && hunk && (reason.includes(hunk.path) || reason.includes("this file"))) {
    const lines = where.slice(hunk.path.length + 1);
    return `${reason}${lines ? ` (line${lines.includes("-") ? "s" : ""} ${lines})` : ""}${more}`;
  }
  return [reason, where ? where + more : ""].filter((s) => !!s).join(" · ");
}

const VERBS: Record<string, string> = { reverted: "reverted", reapplied: "re-applied", fixed: "fixed", "cherry-picked": "cherry-picked" };

/** A gap in days as people say it: "the same day", "2 days later", "3 weeks later" (server: views/consequences.py). */
export function later(days: number): string {
  if (!(days >= 1)) return "the same day";
  for (const [size, unit] of [
    [365, "year"],
    [30, "month"],
    [7, "week"],
    [1, "day"],
  ] as const) {
    if (days >= size) {
      const n = Math.floor(days / size);
      return `${n} ${unit}${n !== 1 ? "s" : ""} later`;
    }
  }
  return "later";
}

function short(c: CommitInfo): string {
  return c.short_sha ?? c.sha.slice(0, 7);
}

/** What became of a commit, oldest first: "reverted 3 weeks later by 1a2b3c4; re-applied 1 month later by …". */
export function consequenceLine(items: Consequence[] | undefined): string {
  return (items ?? []).map((c) => `${VERBS[c.kind] ?? c.kind} ${later(c.after_days)} by ${short(c.by)}`).join("; ");
}

/** Identical changes shown once: "the same change also as 1a2b3c4, 5d6e7f8" ("" without twins). */
export function twinsLine(twins: CommitInfo[] | undefined): string {
  return twins?.length ? `the same change also as ${twins.map(short).join(", ")}` : "";
}

/** Consequences and twins in one line ("" when nothing is known). */
export function fateLine(item: ResultItem): string {
  return [consequenceLine(item.consequences), twinsLine(item.twins)].filter((s) => !!s).join("; ");
}

/** The commit view's extra header lines for a result: "Later:  …" and "Same:   …". */
export function fateHeader(item: ResultItem): string[] {
  const out: string[] = [];
  const fate = consequenceLine(item.consequences);
  if (fate) out.push(`Later:  ${fate}`);
  const twins = twinsLine(item.twins);
  if (twins) out.push(`Same:   ${twins}`);
  return out;
}

/**
 * A showCommit answer with extra header lines after its "Date:" line (else after the first line); the hunk
 * positions below them move down.
 */
export function withHeaderLines(result: ShowCommitResult, extra: string[]): ShowCommitResult {
  if (!extra.length) return result;
  const lines = result.text.split("\n");
  const date = lines.slice(0, 6).findIndex((l) => l.startsWith("Date:"));
  const at = (date >= 0 ? date : 0) + 1;
  lines.splice(at, 0, ...extra);
  return {
    ...result,
    text: lines.join("\n"),
    hunks: result.hunks?.map((h) => (h.line >= at ? { ...h, line: h.line + extra.length } : h)),
  };
}

export function target(item: ResultItem): CommitTarget {
  const hunk = primaryHunk(item);
  const fate = fateHeader(item);
  return {
    sha: item.commit.sha,
    shortSha: shortSha(item),
    subject: item.commit.subject ?? "",
    path: hunk?.path,
    oldPath: hunk?.old_path ?? undefined,
    newStart: hunk?.new_start,
    provenance: (item.provenance ?? "INFERRED").toUpperCase(),
    ...(fate.length ? { fate } : {}),
  };
}

export function resultEntry(item: ResultItem, now: Date = new Date()): PickEntry {
  const c = item.commit;
  const description = [shortSha(item), c.author?.name, relativeDate(c.date ?? c.commit_date, now)]
    .filter((s) => !!s)
    .join(" · ");
  const detail = [whyLine(item), fateLine(item)].filter((s) => !!s).join(" · ");
  return { kind: "item", label: c.subject || "(no subject)", description, detail, target: target(item) };
}

/** The EXACT commits of a prior-art answer, whether `exact` is the symbol-history object or a list. */
export function exactItems(res: PriorArtResult): ResultItem[] {
  const exact = res.exact;
  if (!exact) return [];
  const items = Array.isArray(exact) ? exact : (exact.commits ?? []);
  return items.map((i) => ({ ...i, provenance: i.provenance ?? "EXACT" }));
}

export function symbolName(res: PriorArtResult): string | undefined {
  return res.symbol?.name ?? (res.exact && !Array.isArray(res.exact) ? res.exact.symbol?.name : undefined) ?? undefined;
}

function count(n: number, what: string): string {
  return `${n.toLocaleString("en-US")} ${what}${n === 1 ? "" : "s"}`;
}

/**
 * Prior art first: the related commits lead; the symbol's exact history follows as one entry that opens it as
 * a second list ("History of fetch_with_retry · 2 changes"), instead of up to 50 rows in front.
 */
export function priorArtEntries(res: PriorArtResult, now: Date = new Date()): PickEntry[] {
  const name = symbolName(res);
  const exact = exactItems(res);
  const seen = new Set(exact.map((i) => i.commit.sha));
  const related = (res.results ?? []).filter((i) => !seen.has(i.commit.sha));
  const out: PickEntry[] = related.map((i) => resultEntry(i, now));
  if (exact.length) {
    if (out.length) out.push({ kind: "separator", label: "" });
    const title = name ? `History of ${name}` : "Exact history";
    out.push({
      kind: "group",
      label: `$(history) ${title}`,
      description: count(exact.length, "change"),
      detail: `Every commit that changed ${name ?? "it"}, newest first: ${exact[0].commit.subject ?? ""}`,
      group: { title, entries: exact.map((i) => resultEntry(i, now)) },
    });
  }
  return out;
}

export function historyEntries(res: SymbolHistory, now: Date = new Date()): PickEntry[] {
  return (res.commits ?? []).map((i) => resultEntry({ ...i, provenance: i.provenance ?? "EXACT" }, now));
}

export function searchEntries(res: SearchResult, now: Date = new Date()): PickEntry[] {
  return (res.results ?? []).map((i) => resultEntry(i, now));
}

export function changesEntries(res: ChangesResult, now: Date = new Date()): PickEntry[] {
  return searchEntries(res, now);
}

/** "your changes (2 files)", "a1b2c3d's changes", "a..b" — what a findPriorArtForChanges answer was about. */
export function changesAbout(res: ChangesResult): string {
  const c = res.changes;
  const files = c?.files?.length ?? 0;
  const inFiles = files ? ` (${count(files, "file")})` : "";
  if (c?.spec) return `${c.spec}${inFiles}`;
  return `your changes${inFiles}`;
}

/** The sentence for a findPriorArtForChanges answer with nothing to pick: when there was no change, the
 * server's hint says so ("no changes to search for: the worktree has no uncommitted changes …"). */
export function changesEmptyMessage(res: ChangesResult): string {
  if (!res.changes?.files?.length) {
    const hint = res._meta?.hint;
    return hint ? `Backstory: ${hint}.` : "Backstory: there are no uncommitted changes to find prior art for.";
  }
  return emptyMessage("prior art found for these changes", res);
}

/** The sentence that says an answer is partial (the server's `_meta.partial` and `hint`), else undefined. */
export function partialNote(meta: Meta | undefined): string | undefined {
  if (!meta?.partial) return undefined;
  return `Partial results: ${meta.hint ?? "the index is not complete yet"}`;
}

/** A sentence for an answer with nothing to pick: the server's hint or message when it gave one. */
export function emptyMessage(what: string, res: { _meta?: Meta; message?: string | null }): string {
  const why = res.message ?? res._meta?.hint;
  return why ? `Backstory: no ${what} (${why}).` : `Backstory: no ${what}.`;
}

/**
 * The 0-based line of `text` to scroll to for a commit opened from a result: the hunk header of the hunk
 * that matched (same path and new_start), else the closest hunk of that path, else the first hunk, else 0.
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
    const byDistance = [...samePath].sort(
      (a, b) => Math.abs((a.new_start ?? 0) - newStart) - Math.abs((b.new_start ?? 0) - newStart),
    );
    return byDistance[0].line;
  }
  if (samePath.length) return samePath[0].line;
  return list[0]?.line ?? 0;
}

/** A title that is cut at a word boundary (with "…"), never in the middle of a word. */
export function shortTitle(text: string, max: number): string {
  const clean = text.replace(/\s+/g, " ").trim();
  if (clean.length <= max) return clean;
  const cut = clean.slice(0, max - 1);
  const space = cut.lastIndexOf(" ");
  return (space > max / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:.-]+$/, "") + "…";
}
