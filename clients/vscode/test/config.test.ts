import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { RESTART_KEYS, readSettings, serverSection, type ConfigGetter } from "../src/config";

function getter(values: Record<string, unknown>): ConfigGetter {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

describe("settings", () => {
  it("has defaults", () => {
    const s = readSettings(getter({}));
    assert.deepEqual(s, {
      server: { path: "", args: [] },
      resultsCount: 10,
      rerank: true,
      secondStage: "learned",
      allBranches: false,
      hoverEnabled: true,
      hoverPrewarm: true,
      trace: "off",
      testResultsFile: "",
    });
  });
  it("clamps and validates values", () => {
    const s = readSettings(getter({ "results.count": 500, rerank: "bogus", "server.args": ["--a", 3], "hover.enabled": false }));
    assert.equal(s.resultsCount, 100);
    assert.equal(s.rerank, true);
    assert.deepEqual(s.server.args, ["--a", "3"]);
    assert.equal(s.hoverEnabled, false);
    assert.equal(readSettings(getter({ "hover.prewarm": false })).hoverPrewarm, false);
    assert.equal(readSettings(getter({ "results.count": 0 })).resultsCount, 1);
    assert.equal(readSettings(getter({ secondStage: "blend" })).secondStage, "blend");
    assert.equal(readSettings(getter({ secondStage: "bogus" })).secondStage, "learned");
    assert.equal(readSettings(getter({ allBranches: true })).allBranches, true);
    assert.equal(readSettings(getter({ allBranches: "yes" })).allBranches, false);
  });
  it("builds the section sent as initializationOptions and for workspace/configuration", () => {
    const s = readSettings(getter({ "server.path": "/x/backstory", "results.count": 7, rerank: false, "trace.server": "verbose" }));
    assert.deepEqual(serverSection(s), {
      server: { path: "/x/backstory", args: [] },
      results: { count: 7 },
      rerank: false,
      secondStage: "learned",
      allBranches: false,
      hover: { enabled: true, prewarm: true, links: true },
      trace: { server: "verbose" },
    });
  });
  it("restarts for server-affecting settings only", () => {
    assert.deepEqual(RESTART_KEYS, [
      "backstory.server",
      "backstory.results",
      "backstory.rerank",
      "backstory.secondStage",
      "backstory.allBranches",
      "backstory.hover",
    ]);
  });
});
