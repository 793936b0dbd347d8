// Pure text for the status bar item and the status summary. No "vscode" import.
import type { StatusNotification } from "./protocol";

export interface StatusView {
  text: string;
  tooltip: string;
  level: "normal" | "warning" | "error";
}

const fmt = (n: number) => n.toLocaleString("en-US");

/** What each indexing phase counts, as the server says it ("indexing history 1,000/1,522 commits"). */
const PHASES: Record<string, [string, string]> = {
  history: ["indexing history", "commits"],
  merge_paths: ["listing merges", "merges"],
  merges: ["diffing merges", "merges"],
  symbols: ["attaching symbols", "commits"],
  texts: ["storing commit texts", "commits"],
  message_index: ["indexing messages", "commits"],
  dense: ["embedding", "files"],
  messages: ["embedding messages", "commits"],
};

/** One line with units: "indexing history 1,000/1,522 commits", "embedding 512/4,635 files". */
export function progressText(s: StatusNotification): string {
  const [label, unit] = PHASES[s.phase ?? ""] ?? [s.phase ? `indexing (${s.phase})` : "indexing", "items"];
  if (typeof s.done === "number" && typeof s.total === "number" && s.total > 0) return `${label} ${fmt(s.done)}/${fmt(s.total)} ${unit}`;
  return `${label}…`;
}

/** One line about how fresh the index is: "1,234 commits indexed, up to date". */
export function freshness(s: { indexed_commits?: number; commits_behind_head?: number | null; dense_coverage?: number | null }): string {
  const parts: string[] = [];
  if (typeof s.indexed_commits === "number") parts.push(`${fmt(s.indexed_commits)} commits indexed`);
  if (typeof s.commits_behind_head === "number") {
    parts.push(s.commits_behind_head === 0 ? "up to date" : `${fmt(s.commits_behind_head)} behind HEAD`);
  }
  if (typeof s.dense_coverage === "number" && s.dense_coverage < 1) {
    parts.push(`embeddings ${Math.floor(s.dense_coverage * 100)}%`);
  }
  return parts.join(", ");
}

export function statusView(s: StatusNotification): StatusView {
  const fresh = freshness(s);
  const progress = s.state === "indexing" ? progressText(s) : "";
  const tooltip = ["Backstory", progress || s.message, fresh, s.repo ? `Repository: ${s.repo}` : ""].filter((x) => !!x).join("\n");
  switch (s.state) {
    case "indexing":
      return { text: `$(sync~spin) Backstory: ${progress}`, tooltip, level: "normal" };
    case "ready": {
      const behind = typeof s.commits_behind_head === "number" && s.commits_behind_head > 0;
      return {
        text: behind ? `$(history) Backstory: ${fmt(s.commits_behind_head ?? 0)} commits behind` : "$(history) Backstory",
        tooltip,
        level: behind ? "warning" : "normal",
      };
    }
    case "error":
      return { text: "$(error) Backstory", tooltip, level: "error" };
    case "no-repo":
      return { text: "$(circle-slash) Backstory", tooltip: tooltip + "\nNo git repository in this workspace.", level: "warning" };
    case "starting":
    default:
      return { text: "$(loading~spin) Backstory", tooltip, level: "normal" };
  }
}

/** The sentence shown when a reindex the user asked for has finished ("indexed 3 new commits; 1,525 …"). */
export function reindexDone(s: StatusNotification): string {
  if (s.state === "error") return `Backstory: reindexing failed: ${s.message ?? "see Backstory: Show Output"}.`;
  const what = s.message && s.message !== "done" ? s.message.replace(/commit\(s\)/, "new commit(s)") : "done";
  const fresh = freshness(s);
  return `Backstory: reindexing finished: ${what}${fresh ? `; ${fresh}` : ""}.`;
}

/** A one-paragraph summary of `backstory.status`'s JSON for a notification. */
export function summarizeStatus(status: unknown): string {
  if (!status || typeof status !== "object") return "Backstory: no status.";
  const s = status as Record<string, unknown>;
  // `backstory.status` may nest the server's own view (the `backstory/status` payload) under "server".
  const server = (s.server && typeof s.server === "object" ? s.server : {}) as Record<string, unknown>;
  const index = (s.index && typeof s.index === "object" ? s.index : s) as Record<string, unknown>;
  const parts: string[] = [];
  const state = typeof s.state === "string" ? s.state : typeof server.state === "string" ? server.state : undefined;
  if (state === "indexing") parts.push(progressText(server as StatusNotification));
  else if (state) parts.push(state);
  const fresh = freshness(index as Parameters<typeof freshness>[0]);
  if (fresh) parts.push(fresh);
  if (typeof index.indexed_at === "string") parts.push(`indexed at ${index.indexed_at}`);
  const message = typeof s.message === "string" && s.message ? s.message : server.message;
  if (typeof message === "string" && message && state !== "ready" && state !== "indexing") parts.push(message);
  if (typeof s.hint === "string" && s.hint && state !== "indexing") parts.push(s.hint);
  const repo = typeof s.repo === "string" ? s.repo : typeof server.repo === "string" ? server.repo : undefined;
  if (!parts.length) return `Backstory: ${JSON.stringify(status)}`;
  return `Backstory${repo ? ` (${repo})` : ""}: ${parts.join("; ")}.`;
}
