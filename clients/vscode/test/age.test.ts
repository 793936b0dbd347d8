import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { relativeDate } from "../src/age";

/** tests/data/ages.json at the repository root: the table the server and the Neovim client are tested with. */
function table(): { now: string; cases: { date: string; expected: string }[] } {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, "tests", "data", "ages.json");
    if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, "utf8"));
  }
  throw new Error("tests/data/ages.json not found above " + __dirname);
}

describe("relativeDate (the shared table)", () => {
  const t = table();
  const now = new Date(t.now);
  for (const c of t.cases) {
    it(`${c.date} → ${c.expected}`, () => assert.equal(relativeDate(c.date, now), c.expected));
  }
  it("missing and invalid dates give nothing", () => {
    assert.equal(relativeDate(undefined, now), "");
    assert.equal(relativeDate("not a date", now), "");
  });
});
