import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { freshness, statusView, summarizeStatus } from "../src/statusText";

describe("status bar", () => {
  it("shows indexing progress", () => {
    const v = statusView({ state: "indexing", phase: "history", done: 120, total: 5000, indexed_commits: 120, commits_behind_head: 4880, dense_coverage: 0, message: "Indexing history 120/5,000 commits", repo: "/r" });
    assert.equal(v.text, "$(sync~spin) Backstory 120/5,000");
    assert.match(v.tooltip, /Indexing history 120\/5,000 commits/);
    assert.match(v.tooltip, /120 commits indexed, 4,880 behind HEAD, embeddings 0%/);
    assert.equal(v.level, "normal");
  });
  it("shows ready, stale, error and no-repo", () => {
    assert.equal(statusView({ state: "ready", indexed_commits: 9, commits_behind_head: 0, dense_coverage: 1 }).text, "$(history) Backstory");
    const stale = statusView({ state: "ready", commits_behind_head: 3 });
    assert.equal(stale.text, "$(history) Backstory (stale)");
    assert.equal(stale.level, "warning");
    assert.equal(statusView({ state: "error", message: "boom" }).level, "error");
    assert.match(statusView({ state: "no-repo" }).tooltip, /No git repository/);
    assert.equal(statusView({}).text, "$(loading~spin) Backstory");
  });
  it("summarises freshness", () => {
    assert.equal(freshness({ indexed_commits: 1234, commits_behind_head: 0, dense_coverage: 1 }), "1,234 commits indexed, up to date");
    assert.equal(freshness({}), "");
  });
  it("summarises status JSON of either shape", () => {
    assert.equal(
      summarizeStatus({ state: "ready", repo: "/r", index: { indexed_commits: 5, commits_behind_head: 0, indexed_at: "2026-11-22T03:00:00+00:00" } }),
      "Backstory (/r): ready; 5 commits indexed, up to date; indexed at 2026-11-22T03:00:00+00:00.",
    );
    assert.equal(summarizeStatus({ indexed_commits: 2, commits_behind_head: 1 }), "Backstory: 2 commits indexed, 1 behind HEAD.");
    assert.equal(
      summarizeStatus({ indexed_commits: 6, commits_behind_head: 0, server: { state: "indexing", message: "Embedding 3/6", repo: "/w" } }),
      "Backstory (/w): indexing; 6 commits indexed, up to date; Embedding 3/6.",
    );
    assert.equal(summarizeStatus(null), "Backstory: no status.");
    assert.equal(summarizeStatus({ foo: 1 }), 'Backstory: {"foo":1}');
  });
});
