import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { freshness, progressText, reindexDone, statusView, summarizeStatus } from "../src/statusText";

describe("status bar", () => {
  it("shows indexing progress on one line, with units", () => {
    const v = statusView({ state: "indexing", phase: "history", done: 1000, total: 1522, indexed_commits: 120, commits_behind_head: 4880, dense_coverage: 0, message: "indexing history 1,000/1,522 commits", repo: "/r" });
    assert.equal(v.text, "$(sync~spin) Backstory: indexing history 1,000/1,522 commits");
    assert.equal(v.tooltip.split("\n").filter((l) => l.includes("1,000/1,522")).length, 1, "the progress is said once");
    assert.equal(v.level, "normal");
    assert.equal(statusView({ state: "indexing", phase: "dense", done: 512, total: 4635 }).text, "$(sync~spin) Backstory: embedding 512/4,635 files");
    assert.equal(progressText({ state: "indexing", phase: "merges", done: 3, total: 9 }), "diffing merges 3/9 merges");
    assert.equal(progressText({ state: "indexing", phase: "texts", done: 256, total: 60642 }), "storing commit texts 256/60,642 commits");
    assert.equal(progressText({ state: "indexing", phase: "history" }), "indexing history…");
  });
  it("shows ready, behind, error and no-repo", () => {
    assert.equal(statusView({ state: "ready", indexed_commits: 9, commits_behind_head: 0, dense_coverage: 1 }).text, "$(history) Backstory");
    const stale = statusView({ state: "ready", commits_behind_head: 3 });
    assert.equal(stale.text, "$(history) Backstory: 3 commits behind");
    assert.equal(stale.level, "warning");
    assert.equal(statusView({ state: "error", message: "boom" }).level, "error");
    assert.match(statusView({ state: "no-repo" }).tooltip, /No git repository/);
    assert.equal(statusView({}).text, "$(loading~spin) Backstory");
  });
  it("says when a reindex finished", () => {
    assert.equal(
      reindexDone({ state: "ready", message: "indexed 3 commit(s)", indexed_commits: 1525, commits_behind_head: 0 }),
      "Backstory: reindexing finished: indexed 3 new commit(s); 1,525 commits indexed, up to date.",
    );
    assert.equal(reindexDone({ state: "error", message: "disk full" }), "Backstory: reindexing failed: disk full.");
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
      summarizeStatus({ indexed_commits: 6, commits_behind_head: 0, hint: "run `backstory index`", server: { state: "indexing", phase: "dense", done: 3, total: 6, repo: "/w" } }),
      "Backstory (/w): embedding 3/6 files; 6 commits indexed, up to date.",
    );
    assert.equal(summarizeStatus(null), "Backstory: no status.");
    assert.equal(summarizeStatus({ foo: 1 }), 'Backstory: {"foo":1}');
  });
});
