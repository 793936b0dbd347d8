import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import {
  emptyMessage,
  exactItems,
  formatLanes,
  formatWhy,
  historyEntries,
  hunkLine,
  hunkLocation,
  priorArtEntries,
  primaryHunk,
  relativeDate,
  resultEntry,
  searchEntries,
} from "../src/picker";
import type { PriorArtResult, ResultItem } from "../src/protocol";

const NOW = new Date("2026-11-22T12:00:00Z");
const ago = (seconds: number) => new Date(NOW.getTime() - seconds * 1000).toISOString();
const DAY = 86400;

function item(over: Partial<ResultItem> & { sha?: string; subject?: string } = {}): ResultItem {
  const sha = over.sha ?? "9f1c2ab0000000000000000000000000000000aa";
  return {
    provenance: "INFERRED",
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

describe("relativeDate", () => {
  const cases: [number, string][] = [
    [0, "just now"],
    [30, "just now"],
    [50, "50 seconds ago"],
    [60 * 5, "5 minutes ago"],
    [3600, "1 hour ago"],
    [3600 * 5, "5 hours ago"],
    [DAY * 1.5, "yesterday"],
    [DAY * 3, "3 days ago"],
    [DAY * 10, "10 days ago"],
    [DAY * 15, "2 weeks ago"],
    [DAY * 40, "1 month ago"],
    [DAY * 200, "6 months ago"],
    [DAY * 366, "1 year ago"],
    [DAY * 365 * 3 + DAY, "3 years ago"],
  ];
  for (const [seconds, expected] of cases) {
    it(`${seconds}s → ${expected}`, () => assert.equal(relativeDate(ago(seconds), NOW), expected));
  }
  it("handles the future, missing and invalid dates", () => {
    assert.equal(relativeDate(ago(-3 * DAY), NOW), "in 3 days");
    assert.equal(relativeDate(undefined, NOW), "");
    assert.equal(relativeDate("not a date", NOW), "");
  });
  it("accepts ISO 8601 with an offset", () => {
    assert.equal(relativeDate("2026-11-22T13:00:00+02:00", NOW), "1 hour ago");
  });
});

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

describe("why it matched", () => {
  it("lists lanes by rank and skips nulls", () => {
    assert.equal(formatLanes({ diff: 1, message: 2, path: null, symbol: 4, dense: 1 }), "dense #1, diff #1, message #2, symbol #4");
    assert.equal(formatLanes(undefined), "");
  });
  it("says INFERRED with lanes and rerank", () => {
    assert.equal(formatWhy(item()), "INFERRED · dense #1, diff #1, message #2, symbol #4 · rerank 0.71");
  });
  it("says EXACT with the symbol", () => {
    const exact = item({ provenance: "EXACT", why: null });
    assert.equal(formatWhy(exact, "fetch_with_retry"), "EXACT · changed `fetch_with_retry`");
    assert.equal(formatWhy(exact), "EXACT · symbol history");
  });
  it("adds the learned second stage's score when it ordered the results", () => {
    const why = { lanes: { diff: 1 }, rerank: 0.5, learned: 0.834 };
    assert.equal(formatWhy(item({ why })), "INFERRED · diff #1 · rerank 0.50 · learned 0.83");
  });

  it("omits rerank when it was off", () => {
    assert.equal(formatWhy(item({ why: { lanes: { message: 1 }, rerank: null } })), "INFERRED · message #1");
  });
});

describe("picker entries", () => {
  it("label = subject, description = sha · author · date, detail = file:lines · why", () => {
    const e = resultEntry(item(), NOW);
    assert.equal(e.kind, "item");
    assert.equal(e.label, "Add retry with backoff");
    assert.equal(e.description, "9f1c2ab · Ada · 3 days ago");
    assert.equal(e.detail, "src/http.py:10-21 · INFERRED · dense #1, diff #1, message #2, symbol #4 · rerank 0.71");
    assert.deepEqual(e.target, {
      sha: "9f1c2ab0000000000000000000000000000000aa",
      shortSha: "9f1c2ab",
      subject: "Add retry with backoff",
      path: "src/http.py",
      newStart: 10,
      provenance: "INFERRED",
    });
  });
  it("mentions other files and survives missing fields", () => {
    const e = resultEntry(
      item({ hunks: [{ path: "a.py", new_start: 1, new_lines: 3 }, { path: "b.py" }, { path: "c.py" }] }),
      NOW,
    );
    assert.match(e.detail ?? "", /^a\.py:1-3 \(\+2 more files\) · INFERRED/);
    const bare = resultEntry({ commit: { sha: "abcdef1234567" } }, NOW);
    assert.equal(bare.label, "(no subject)");
    assert.equal(bare.description, "abcdef1");
    assert.equal(bare.detail, "INFERRED");
  });
  it("puts the exact history first, then related commits, de-duplicated", () => {
    const exactCommit = item({ sha: "1".repeat(40), subject: "Add fetch_with_retry", provenance: "EXACT", why: null });
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
        ["separator", "History of fetch_with_retry"],
        ["item", "Add fetch_with_retry"],
        ["separator", "Related elsewhere"],
        ["item", "Retry uploads"],
      ],
    );
    assert.match(entries[1].detail ?? "", /EXACT · changed `fetch_with_retry`/);
    assert.equal(entries[1].target?.provenance, "EXACT");
  });
  it("accepts `exact` as a plain list and marks it EXACT", () => {
    const res: PriorArtResult = { exact: [{ commit: { sha: "3".repeat(40), subject: "s" } }], results: [] };
    assert.equal(exactItems(res)[0].provenance, "EXACT");
    assert.deepEqual(priorArtEntries(res, NOW).map((e) => e.kind), ["separator", "item"]);
  });
  it("has no separators for search results and history", () => {
    assert.deepEqual(searchEntries({ results: [item()] }, NOW).map((e) => e.kind), ["item"]);
    const h = historyEntries({ symbol: { name: "f" }, commits: [{ commit: { sha: "4".repeat(40), subject: "x" } }] }, NOW);
    assert.equal(h[0].target?.provenance, "EXACT");
    assert.match(h[0].detail ?? "", /EXACT · changed `f`/);
    assert.deepEqual(priorArtEntries({ results: [] }, NOW), []);
  });
  it("explains an empty answer with the server's hint or message", () => {
    assert.equal(emptyMessage("prior art found", { _meta: { hint: "The index is empty: run Backstory: Reindex." } }),
      "Backstory: no prior art found. The index is empty: run Backstory: Reindex.");
    assert.equal(emptyMessage("history", { message: "no enclosing symbol at a.py:3" }), "Backstory: no history. no enclosing symbol at a.py:3");
    assert.equal(emptyMessage("matching commits", {}), "Backstory: no matching commits.");
  });
});
