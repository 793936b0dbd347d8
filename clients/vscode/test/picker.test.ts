import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import {
  changesAbout,
  changesEmptyMessage,
  changesEntries,
  consequenceLine,
  emptyMessage,
  exactItems,
  historyEntries,
  hunkLine,
  hunkLocation,
  partialNote,
  priorArtEntries,
  primaryHunk,
  resultEntry,
  searchEntries,
  shortTitle,
  whyLine,
  withHeaderLines,
} from "../src/picker";
import type { Consequence, PriorArtResult, ResultItem } from "../src/protocol";

const NOW = new Date("2026-11-22T12:00:00Z");
const ago = (seconds: number) => new Date(NOW.getTime() - seconds * 1000).toISOString();
const DAY = 86400;

function item(over: Partial<ResultItem> & { sha?: string; subject?: string } = {}): ResultItem {
  const sha = over.sha ?? "9f1c2ab0000000000000000000000000000000aa";
  return {
    provenance: "INFERRED",
    reason: "similar change in src/http.py",
    score: 0.03,
    commit: {
      sha,
      short_sha: sha.slice(0, 7),
      subject: over.subject ?? "Add retry with backoff",
      author: { name: "Ada", email: "ada@example.com" },
      date: ago(3 * DAY),
    },
    why: { lanes: { diff: 1, message: 2, path: null, symbol: 4, dense: 1 }, fused: 0.06, rerank: 0.71, recency: 1.03 },
    hunks: [
      { path: "src/http.py", change: "modify", old_start: 10, old_lines: 3, new_start: 10, new_lines: 12, lanes: { diff: 1 } },
    ],
    ...over,
  };
}

describe("hunks", () => {
  it("formats the new side, a single line, and deletions on the old side", () => {
    assert.equal(hunkLocation({ path: "a.py", new_start: 10, new_lines: 12 }), "a.py:10-21");
    assert.equal(hunkLocation({ path: "a.py", new_start: 7, new_lines: 1 }), "a.py:7");
    assert.equal(
      hunkLocation({ path: "b.py", old_path: "b.py", change: "delete", old_start: 3, old_lines: 4, new_start: 0, new_lines: 0 }),
      "b.py:3-6",
    );
    assert.equal(hunkLocation({ path: "c.py" }), "c.py");
  });
  it("picks the best-ranked hunk, else the first", () => {
    const it1 = item({
      hunks: [
        { path: "x.py", new_start: 1, new_lines: 2 },
        { path: "y.py", new_start: 5, new_lines: 2, lanes: { diff: 3 } },
        { path: "z.py", new_start: 9, new_lines: 2, lanes: { symbol: 1, diff: 7 } },
      ],
    });
    assert.equal(primaryHunk(it1)?.path, "z.py");
    assert.equal(primaryHunk(item({ hunks: [{ path: "x.py" }, { path: "y.py" }] }))?.path, "x.py");
    assert.equal(primaryHunk(item({ hunks: [] })), undefined);
  });
  it("finds the line to scroll to", () => {
    const hunks = [
      { path: "a.py", new_start: 1, line: 8 },
      { path: "b.py", new_start: 10, line: 20 },
      { path: "b.py", new_start: 50, line: 31 },
    ];
    assert.equal(hunkLine(hunks, "b.py", 50), 31);
    assert.equal(hunkLine(hunks, "b.py", 12), 20);
    assert.equal(hunkLine(hunks, "b.py", 45), 31);
    assert.equal(hunkLine(hunks, "b.py"), 20);
    assert.equal(hunkLine(hunks, "nope.py", 3), 8);
    assert.equal(hunkLine([], "a.py", 1), 0);
    assert.equal(hunkLine(undefined), 0);
  });
});

describe("why, in words", () => {
  it("shows the server's reason with the lines, not lane ranks or scores", () => {
    assert.equal(whyLine(item()), "similar change in src/http.py (lines 10-21)");
    const line = whyLine(item({ reason: "message matches your words" }));
    assert.equal(line, "message matches your words · src/http.py:10-21");
    assert.doesNotMatch(line, /#|rerank|learned|dense|`/);
    assert.equal(whyLine(item({ reason: "similar code in this file" })), "similar code in this file (lines 10-21)");
  });
  it("mentions other files and survives a missing reason", () => {
    const many = item({ hunks: [{ path: "src/http.py", new_start: 1, new_lines: 3 }, { path: "b.py" }, { path: "c.py" }] });
    assert.equal(whyLine(many), "similar change in src/http.py (lines 1-3) (+2 more files)");
    assert.equal(whyLine(item({ reason: undefined })), "src/http.py:10-21");
  });
});

describe("picker entries", () => {
  it("label = subject, description = sha · author · date, detail = why in words", () => {
    const e = resultEntry(item(), NOW);
    assert.equal(e.kind, "item");
    assert.equal(e.label, "Add retry with backoff");
    assert.equal(e.description, "9f1c2ab · Ada · 3 days ago");
    assert.equal(e.detail, "similar change in src/http.py (lines 10-21)");
    assert.deepEqual(e.target, {
      sha: "9f1c2ab0000000000000000000000000000000aa",
      shortSha: "9f1c2ab",
      subject: "Add retry with backoff",
      path: "src/http.py",
      oldPath: undefined,
      newStart: 10,
      provenance: "INFERRED",
    });
    const bare = resultEntry({ commit: { sha: "abcdef1234567" } }, NOW);
    assert.equal(bare.label, "(no subject)");
    assert.equal(bare.description, "abcdef1");
    assert.equal(bare.detail, "");
  });
  it("puts prior art first and the exact history behind one entry that opens it", () => {
    const exactCommit = item({ sha: "1".repeat(40), subject: "Add fetch_with_retry", provenance: "EXACT", reason: "same function" });
    const related = item({ sha: "2".repeat(40), subject: "Retry uploads" });
    const res: PriorArtResult = {
      symbol: { name: "fetch_with_retry", kind: "function" },
      exact: { symbol: { name: "fetch_with_retry" }, commits: [exactCommit] },
      results: [related, { ...exactCommit, provenance: "INFERRED" }],
    };
    const entries = priorArtEntries(res, NOW);
    assert.deepEqual(
      entries.map((e) => [e.kind, e.label]),
      [
        ["item", "Retry uploads"],
        ["separator", ""],
        ["group", "$(history) History of fetch_with_retry"],
      ],
    );
    const group = entries[2];
    assert.equal(group.description, "1 change");
    assert.deepEqual(group.group?.entries.map((e) => [e.label, e.target?.provenance, e.detail]), [
      ["Add fetch_with_retry", "EXACT", "same function · src/http.py:10-21"],
    ]);
  });
  it("a prior-art answer with no related commit still opens with the history entry", () => {
    const res: PriorArtResult = { exact: [{ commit: { sha: "3".repeat(40), subject: "s" } }], results: [] };
    assert.equal(exactItems(res)[0].provenance, "EXACT");
    assert.deepEqual(priorArtEntries(res, NOW).map((e) => e.kind), ["group"]);
    assert.deepEqual(priorArtEntries({ results: [] }, NOW), []);
  });
  it("has no separators for search results and history", () => {
    assert.deepEqual(searchEntries({ results: [item()] }, NOW).map((e) => e.kind), ["item"]);
    const h = historyEntries({ symbol: { name: "f" }, commits: [{ commit: { sha: "4".repeat(40), subject: "x" } }] }, NOW);
    assert.equal(h[0].target?.provenance, "EXACT");
  });
  it("labels partial answers with the server's hint", () => {
    assert.equal(partialNote({ partial: true, hint: "indexing history 1,000/1,522 commits: results are partial until it finishes" }),
      "Partial results: indexing history 1,000/1,522 commits: results are partial until it finishes");
    assert.equal(partialNote({ partial: false, hint: "x" }), undefined);
    assert.equal(partialNote(undefined), undefined);
  });
  it("explains an empty answer with the server's hint or message", () => {
    assert.equal(emptyMessage("prior art found", { _meta: { hint: "the index is empty" } }), "Backstory: no prior art found (the index is empty).");
    assert.equal(emptyMessage("history", { message: "no enclosing symbol at a.py:3" }), "Backstory: no history (no enclosing symbol at a.py:3).");
    assert.equal(emptyMessage("matching commits", {}), "Backstory: no matching commits.");
  });
});

/** tests/data/consequences.json at the repository root: the table the server and the Neovim client are tested with. */
function consequenceTable(): { cases: { consequences: Consequence[]; expected: string }[] } {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, "tests", "data", "consequences.json");
    if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, "utf8"));
  }
  throw new Error("tests/data/consequences.json not found above " + __dirname);
}

describe("consequences and twins", () => {
  for (const c of consequenceTable().cases) {
    it(`the shared table: ${c.expected || "(none)"}`, () => assert.equal(consequenceLine(c.consequences), c.expected));
  }
  const reverted: Consequence = { kind: "reverted", by: { sha: "1a2b3c4" + "0".repeat(33), short_sha: "1a2b3c4" }, after_days: 21 };
  const twin = { sha: "5d6e7f8" + "0".repeat(33), short_sha: "5d6e7f8", subject: "Add retry with backoff (backport)" };
  it("picker rows say what became of the commit, after why it is shown", () => {
    const e = resultEntry(item({ consequences: [reverted], twins: [twin] }), NOW);
    assert.equal(e.detail, "similar change in src/http.py (lines 10-21) · reverted 3 weeks later by 1a2b3c4; the same change also as 5d6e7f8");
    assert.deepEqual(e.target?.fate, ["Later:  reverted 3 weeks later by 1a2b3c4", "Same:   the same change also as 5d6e7f8"]);
    const exact = historyEntries({ commits: [item({ provenance: "EXACT", reason: "same function", consequences: [reverted] })] }, NOW);
    assert.equal(exact[0].detail, "same function · src/http.py:10-21 · reverted 3 weeks later by 1a2b3c4");
    // nothing known: the row and the target are as before
    assert.equal(resultEntry(item({ consequences: [], twins: [] }), NOW).detail, "similar change in src/http.py (lines 10-21)");
    assert.equal(resultEntry(item({ consequences: [] }), NOW).target?.fate, undefined);
  });
  it("the commit view's header gets those lines after Date:, and the hunks move down", () => {
    const text = "commit abc\nAuthor: Ada <a@x>\nDate:   2024-01-01\n\n    Subject\n\ndiff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b";
    const shown = withHeaderLines({ sha: "abc", text, hunks: [{ path: "x", new_start: 1, line: 7 }] }, ["Later:  reverted 2 days later by 1a2b3c4"]);
    const lines = shown.text.split("\n");
    assert.equal(lines[3], "Later:  reverted 2 days later by 1a2b3c4");
    assert.equal(shown.hunks?.[0].line, 8);
    assert.equal(lines[8], "@@ -1 +1 @@");
    assert.equal(withHeaderLines({ sha: "abc", text }, []).text, text);
  });
});

describe("prior art for changes", () => {
  const files = [{ path: "app/client.py", change: "modify", added: 3, removed: 1 }];
  it("lists the prior art, titled with what the change was", () => {
    const res = { results: [item()], changes: { source: "worktree", spec: null, commits: [], files } };
    assert.deepEqual(changesEntries(res, NOW).map((e) => [e.kind, e.label]), [["item", "Add retry with backoff"]]);
    assert.equal(changesAbout(res), "your changes (1 file)");
    assert.equal(changesAbout({ changes: { source: "commit", spec: "HEAD~1", files: [...files, ...files] } }), "HEAD~1 (2 files)");
  });
  it("says when there are no uncommitted changes, with the server's hint", () => {
    const hint = "no changes to search for: the worktree has no uncommitted changes to indexed kinds of files";
    assert.equal(
      changesEmptyMessage({ results: [], changes: { source: "worktree", files: [] }, _meta: { hint } }),
      `Backstory: ${hint}.`,
    );
    assert.equal(changesEmptyMessage({ results: [] }), "Backstory: there are no uncommitted changes to find prior art for.");
    assert.equal(
      changesEmptyMessage({ results: [], changes: { source: "worktree", files }, _meta: { hint: "the index is empty" } }),
      "Backstory: no prior art found for these changes (the index is empty).",
    );
  });
});

describe("titles", () => {
  it("are cut at a word boundary, never mid-token", () => {
    assert.equal(shortTitle("Add retry with exponential backoff", 50), "Add retry with exponential backoff");
    assert.equal(shortTitle("Add retry with exponential backoff to every HTTP request we make", 40), "Add retry with exponential backoff to…");
    assert.equal(shortTitle("Supercalifragilisticexpialidocious_identifier_name", 20), "Supercalifragilisti…");
  });
});
