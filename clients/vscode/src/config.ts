// Reading the `backstory` settings. Takes a WorkspaceConfiguration-like getter so it has no "vscode" import.
import type { ServerSettings } from "./server";

export const SECTION = "backstory";

export interface ConfigGetter {
  get<T>(key: string): T | undefined;
}

export interface Settings {
  server: ServerSettings;
  resultsCount: number;
  rerank: boolean;
  secondStage: "learned" | "blend";
  allBranches: boolean;
  hoverEnabled: boolean;
  hoverPrewarm: boolean;
  trace: string;
  testResultsFile: string;
}

export function readSettings(cfg: ConfigGetter): Settings {
  const args = cfg.get<unknown>("server.args");
  const count = Number(cfg.get<number>("results.count") ?? 10);
  return {
    server: {
      path: String(cfg.get<string>("server.path") ?? ""),
      args: Array.isArray(args) ? args.map(String) : [],
    },
    resultsCount: Number.isFinite(count) ? Math.min(100, Math.max(1, Math.round(count))) : 10,
    rerank: cfg.get<boolean>("rerank") !== false,
    secondStage: cfg.get<string>("secondStage") === "blend" ? "blend" : "learned",
    allBranches: cfg.get<boolean>("allBranches") === true,
    hoverEnabled: cfg.get<boolean>("hover.enabled") ?? true,
    hoverPrewarm: cfg.get<boolean>("hover.prewarm") !== false,
    trace: String(cfg.get<string>("trace.server") ?? "off"),
    testResultsFile: String(cfg.get<string>("test.resultsFile") ?? ""),
  };
}

/**
 * The `backstory` section as the server sees it: sent as initializationOptions, and the same shape the
 * client answers for `workspace/configuration` (section "backstory").
 */
export function serverSection(s: Settings): Record<string, unknown> {
  return {
    server: { path: s.server.path, args: s.server.args },
    results: { count: s.resultsCount },
    rerank: s.rerank,
    secondStage: s.secondStage,
    allBranches: s.allBranches,
    // links: the hover's command links (open a change, its diff, all changes, prior art) run in VS Code
    hover: { enabled: s.hoverEnabled, prewarm: s.hoverPrewarm, links: true },
    trace: { server: s.trace },
  };
}

/** Settings whose change needs a new server (everything but tracing and the test hook). */
export const RESTART_KEYS = ["server", "results", "rerank", "secondStage", "allBranches", "hover"].map((k) => `${SECTION}.${k}`);
