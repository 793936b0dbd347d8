// Pure text for the status bar item and the status summary. No "vscode" import.
import type { StatusNotification } from "./protocol";

export interface StatusView {
  text: string;
  tooltip: string;
  level: "normal" | "warning" | "error";
}

const fmt = (n: number) => n.toLocaleString("en-US");

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
  const tooltip = ["Backstory", s.message, fresh, s.repo ? `Repository: ${s.repo}` : ""].filter((x) => !!x).join("\n");
  switch (s.state) {
    case "indexing": {
      const progress =
        typeof s.done === "number" && typeof s.total === "number" && s.total > 0 ? ` ${fmt(s.done)}/${fmt(s.total)}` : "";
      return { text: `$(sync~spin) Backstory${progress}`, tooltip, level: "normal" };
    }
    case "ready": {
      const behind = typeof s.commits_behind_head === "number" && s.commits_behind_head > 0;
      return { text: behind ? "$(history) Backstory (stale)" : "$(history) Backstory", tooltip, level: behind ? "warning" : "normal" };
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

/** A one-paragraph summary of `backstory.status`'s JSON for a notification. */
export function summarizeStatus(status: unknown): string {
  if (!status || typeof status !== "object") return "Backstory: no status.";
  const s = status as Record<string, unknown>;
  // `backstory.status` may nest the server's own view (the `backstory/status` payload) under "server".
  const server = (s.server && typeof s.server === "object" ? s.server : {}) as Record<string, unknown>;
  const index = (s.index && typeof s.index === "object" ? s.index : s) as Record<string, unknown>;
  const parts: string[] = [];
  const state = typeof s.state === "string" ? s.state : typeof server.state === "string" ? server.state : undefined;
  if (state) parts.push(state);
  const fresh = freshness(index as Parameters<typeof freshness>[0]);
  if (fresh) parts.push(fresh);
  if (typeof index.indexed_at === "string") parts.push(`indexed at ${index.indexed_at}`);
  const message = typeof s.message === "string" && s.message ? s.message : server.message;
  if (typeof message === "string" && message && state !== "ready") parts.push(message);
  if (typeof s.hint === "string" && s.hint) parts.push(s.hint);
  const repo = typeof s.repo === "string" ? s.repo : typeof server.repo === "string" ? server.repo : undefined;
  if (!parts.length) return `Backstory: ${JSON.stringify(status)}`;
  return `Backstory${repo ? ` (${repo})` : ""}: ${parts.join("; ")}.`;
}
