// Shapes of the Backstory JSON protocol (docs/protocol.md). Everything is optional-tolerant: the
// client must not crash on a field the server leaves out.

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

/** The one object argument of backstory.findPriorArt / backstory.symbolHistory. */
export interface LocationArg {
  uri: string;
  position?: Position;
  range?: Range;
  k?: number;
}

export interface Author {
  name?: string;
  email?: string;
}

export interface CommitInfo {
  sha: string;
  short_sha?: string;
  subject?: string;
  body?: string;
  author?: Author;
  date?: string;
  commit_date?: string;
}

export type Lanes = Record<string, number | null | undefined>;

export interface SymbolInfo {
  name: string;
  kind?: string;
  path?: string;
  start?: number;
  end?: number;
}

export interface Hunk {
  path: string;
  old_path?: string | null;
  change?: "add" | "modify" | "delete" | "rename" | string;
  old_start?: number;
  old_lines?: number;
  new_start?: number;
  new_lines?: number;
  language?: string | null;
  symbols?: SymbolInfo[];
  excerpt?: string;
  truncated?: boolean;
  lanes?: Lanes;
}

export interface Why {
  lanes?: Lanes;
  fused?: number | null;
  rerank?: number | null;
  learned?: number | null;
  recency?: number | null;
}

/** What became of a commit later (exact provenance only), oldest first. */
export interface Consequence {
  kind: "reverted" | "reapplied" | "fixed" | "cherry-picked" | string;
  by: CommitInfo;
  after_days: number;
}

export interface ResultItem {
  provenance?: "EXACT" | "INFERRED" | string;
  /** Why it is shown, in words ("same function", "similar change in src/x.py"); added by the language server. */
  reason?: string;
  score?: number | null;
  commit: CommitInfo;
  why?: Why | null;
  hunks?: Hunk[];
  consequences?: Consequence[];
  /** Identical changes (cherry-picks, backports) shown once: the others' commits. */
  twins?: CommitInfo[];
}

export interface IndexMeta {
  path?: string;
  head?: string | null;
  last_indexed_commit?: string | null;
  indexed_commits?: number;
  commits_behind_head?: number | null;
  indexed_at?: string | null;
  dense_coverage?: number | null;
}

export interface Meta {
  repo?: string;
  index?: IndexMeta | null;
  lanes?: string[];
  rerank?: string | null;
  took_ms?: number;
  hint?: string | null;
  warnings?: string[];
  /** True when the index is incomplete (being indexed, or behind HEAD): the hint says why. */
  partial?: boolean;
  /** The server's indexing progress while it runs. */
  indexing?: { phase?: string | null; done?: number | null; total?: number | null };
}

export interface SymbolHistory {
  symbol?: SymbolInfo | null;
  commits?: ResultItem[];
  _meta?: Meta;
  message?: string | null;
}

export interface SearchResult {
  query?: string;
  results?: ResultItem[];
  _meta?: Meta;
}

export interface PriorArtResult extends SearchResult {
  symbol?: SymbolInfo | null;
  exact?: SymbolHistory | ResultItem[] | null;
}

/** What a backstory.findPriorArtForChanges query was made of. */
export interface ChangesInfo {
  source?: "worktree" | "commit" | "range" | string;
  spec?: string | null;
  commits?: string[];
  files?: { path: string; old_path?: string; change?: string; added?: number; removed?: number; symbols?: string[] }[];
}

/** The argument of backstory.findPriorArtForChanges. */
export interface ChangesArg {
  uri?: string;
  paths?: string[];
  rev?: string;
  k?: number;
  hideReverted?: boolean;
}

export interface ChangesResult extends SearchResult {
  changes?: ChangesInfo;
}

export interface ShowCommitResult {
  sha: string;
  title?: string;
  text: string;
  hunks?: { path: string; new_start?: number; line: number }[];
  files?: { path: string; old_path?: string; change?: string }[];
}

export interface FileAtRevision {
  sha: string | null;
  path: string;
  exists: boolean;
  binary: boolean;
  text: string;
}

/** backstory.hoverInfo: what the hover at a position shows (symbol null where none shows). */
export interface HoverInfo {
  symbol: SymbolInfo | null;
  uri?: string;
  position?: Position;
  commits: ResultItem[];
  total: number;
  more: boolean;
  related: ResultItem[];
  _meta?: Meta;
}

export interface StatusNotification {
  state?: "starting" | "indexing" | "ready" | "error" | "no-repo" | string;
  phase?: string;
  done?: number;
  total?: number;
  indexed_commits?: number;
  commits_behind_head?: number | null;
  dense_coverage?: number | null;
  message?: string;
  repo?: string | null;
}

export const STATUS_NOTIFICATION = "backstory/status";

export const ServerCommands = {
  findPriorArt: "backstory.findPriorArt",
  search: "backstory.search",
  symbolHistory: "backstory.symbolHistory",
  showCommit: "backstory.showCommit",
  fileAtRevision: "backstory.fileAtRevision",
  hoverInfo: "backstory.hoverInfo",
  reindex: "backstory.reindex",
  status: "backstory.status",
  findPriorArtForChanges: "backstory.findPriorArtForChanges",
} as const;

export const UiCommands = {
  findPriorArt: "backstory.ui.findPriorArt",
  findPriorArtForChanges: "backstory.ui.findPriorArtForChanges",
  search: "backstory.ui.search",
  symbolHistory: "backstory.ui.symbolHistory",
  reindex: "backstory.ui.reindex",
  showOutput: "backstory.ui.showOutput",
  showStatus: "backstory.ui.showStatus",
  restart: "backstory.ui.restart",
  openCommit: "backstory.ui.openCommit",
  openChanges: "backstory.ui.openChanges",
  openFileAtRevision: "backstory.ui.openFileAtRevision",
  showView: "backstory.ui.showView",
} as const;

/** Commands hover links may run (the hover's markdown is trusted for these only). */
export const HOVER_COMMANDS = [
  UiCommands.openCommit,
  UiCommands.openChanges,
  UiCommands.symbolHistory,
  UiCommands.findPriorArt,
];
