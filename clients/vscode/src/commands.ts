// The user-facing commands (palette, editor context menu, and the client-side commands carried by the
// server's code actions) and the results picker.
import * as vscode from "vscode";
import type { BackstoryClient } from "./client";
import type { CommitDocuments } from "./commitDocument";
import type { Settings } from "./config";
import {
  emptyMessage,
  historyEntries,
  priorArtEntries,
  searchEntries,
  type CommitTarget,
  type PickEntry,
} from "./picker";
import {
  ServerCommands,
  UiCommands,
  type LocationArg,
  type PriorArtResult,
  type SearchResult,
  type SymbolHistory,
} from "./protocol";
import type { SelfTest } from "./selftest";
import type { StatusBar } from "./status";
import { summarizeStatus } from "./statusText";

export interface Services {
  client: BackstoryClient;
  settings: () => Settings;
  output: vscode.LogOutputChannel;
  selfTest: SelfTest;
  status: StatusBar;
  commits: CommitDocuments;
}

interface Item extends vscode.QuickPickItem {
  entry: PickEntry;
}

function isLocationArg(a: unknown): a is LocationArg {
  if (!a || typeof a !== "object") return false;
  const o = a as Record<string, unknown>;
  return typeof o.uri === "string" && (typeof o.position === "object" || typeof o.range === "object");
}

export function registerCommands(s: Services): vscode.Disposable[] {
  const { client, output, selfTest } = s;

  /** `{uri, position}` / `{uri, range}` from a code action's argument, else from the active editor. */
  function location(arg: unknown): LocationArg | undefined {
    if (isLocationArg(arg)) return { ...arg }; // from a code action
    const editor = vscode.window.activeTextEditor;
    if (!editor) return undefined;
    const uri = client.toServerUri(editor.document.uri);
    const sel = editor.selection;
    const pos = (p: vscode.Position) => ({ line: p.line, character: p.character });
    return sel.isEmpty
      ? { uri, position: pos(sel.active) }
      : { uri, range: { start: pos(sel.start), end: pos(sel.end) } };
  }

  function activeUri(): string | undefined {
    const doc = vscode.window.activeTextEditor?.document;
    if (doc?.uri.scheme === "file") return client.toServerUri(doc.uri);
    const folder = vscode.workspace.workspaceFolders?.[0];
    return folder ? client.toServerUri(folder.uri) : undefined;
  }

  async function fail(what: string, e: unknown): Promise<void> {
    const message = `Backstory: ${what} failed: ${e instanceof Error ? e.message : String(e)}`;
    output.error(message);
    selfTest.write("error", { message });
    if ((await vscode.window.showErrorMessage(message, "Show Output")) === "Show Output") output.show(true);
  }

  async function openCommit(target: CommitTarget & { uri?: string }): Promise<void> {
    try {
      const { editor, line } = await s.commits.open(target);
      const doc = editor.document;
      selfTest.write("open", {
        uri: doc.uri.toString(),
        languageId: doc.languageId,
        sha: target.sha,
        firstLines: Array.from({ length: Math.min(20, doc.lineCount) }, (_v, i) => doc.lineAt(i).text),
        line,
        lineText: doc.lineAt(line).text,
        visibleTop: editor.visibleRanges[0]?.start.line ?? null,
        lineCount: doc.lineCount,
        text: doc.getText().slice(0, 20000),
      });
    } catch (e) {
      await fail("opening the commit", e);
    }
  }

  /** Shows a busy picker at once, fills it when the answer arrives, opens the chosen commit. */
  async function showPicker<T>(
    command: string,
    title: string,
    answer: Promise<T>,
    entries: (t: T) => PickEntry[],
    empty: (t: T) => string,
    originUri?: string,
    via = "palette",
  ): Promise<void> {
    const qp = vscode.window.createQuickPick<Item>();
    qp.title = title;
    qp.placeholder = "Searching history…";
    qp.busy = true;
    qp.matchOnDescription = true;
    qp.matchOnDetail = true;
    let hidden = false;
    qp.onDidHide(() => {
      hidden = true;
      qp.dispose();
    });
    qp.onDidAccept(() => {
      const chosen = qp.selectedItems[0]?.entry.target;
      qp.hide();
      if (chosen) {
        selfTest.write("accept", { command, sha: chosen.sha, subject: chosen.subject });
        void openCommit({ ...chosen, uri: originUri });
      }
    });
    qp.show();
    let result: T;
    try {
      result = await answer;
    } catch (e) {
      qp.hide();
      return fail(title, e);
    }
    const list = entries(result);
    selfTest.write("picker", {
      command,
      via,
      title,
      items: list.map((e) => ({
        kind: e.kind,
        label: e.label,
        description: e.description,
        detail: e.detail,
        sha: e.target?.sha,
        provenance: e.target?.provenance,
      })),
    });
    if (hidden) return;
    if (!list.some((e) => e.kind === "item")) {
      qp.hide();
      const message = empty(result);
      selfTest.write("empty", { command, message });
      void vscode.window.showInformationMessage(message);
      return;
    }
    qp.items = list.map((entry) =>
      entry.kind === "separator"
        ? { label: entry.label, kind: vscode.QuickPickItemKind.Separator, entry }
        : { label: entry.label, description: entry.description, detail: entry.detail, entry },
    );
    qp.placeholder = "Pick a commit to open its diff";
    qp.busy = false;
  }

  const k = () => s.settings().resultsCount;

  const findPriorArt = async (arg?: unknown) => {
    const loc = location(arg);
    if (!loc) return void vscode.window.showWarningMessage("Backstory: open a file and place the cursor on a symbol first.");
    const call = client.request<PriorArtResult>(ServerCommands.findPriorArt, { k: k(), ...loc });
    const title = loc.range ? "Backstory: prior art for the selection" : "Backstory: prior art";
    await showPicker(
      ServerCommands.findPriorArt,
      title,
      call,
      (r) => priorArtEntries(r),
      (r) => emptyMessage("prior art found", r),
      loc.uri,
      isLocationArg(arg) ? "codeAction" : "editor",
    );
  };

  const symbolHistory = async (arg?: unknown) => {
    const loc = location(arg);
    if (!loc) return void vscode.window.showWarningMessage("Backstory: open a file and place the cursor on a symbol first.");
    const position = loc.position ?? loc.range?.start;
    const call = client.request<SymbolHistory>(ServerCommands.symbolHistory, { uri: loc.uri, position });
    await showPicker(
      ServerCommands.symbolHistory,
      "Backstory: symbol history",
      call,
      (r) => historyEntries(r),
      (r) => emptyMessage("history for this symbol", r),
      loc.uri,
      isLocationArg(arg) ? "codeAction" : "editor",
    );
  };

  const search = async (arg?: unknown) => {
    let query = typeof arg === "string" ? arg : undefined;
    query ??= await vscode.window.showInputBox({
      title: "Backstory: Search History",
      prompt: "Describe the change you are looking for, or paste code",
      placeHolder: "e.g. retry an HTTP request with exponential backoff",
      ignoreFocusOut: true,
    });
    if (!query?.trim()) return;
    const uri = activeUri();
    const call = client.request<SearchResult>(ServerCommands.search, { query, k: k(), ...(uri ? { uri } : {}) });
    await showPicker(
      ServerCommands.search,
      `Backstory: “${query}”`,
      call,
      (r) => searchEntries(r),
      (r) => emptyMessage("matching commits", r),
      uri,
      "input",
    );
  };

  const reindex = async () => {
    try {
      const uri = activeUri();
      const r = await client.request<{ started?: boolean; message?: string | null }>(ServerCommands.reindex, uri ? { uri } : {});
      const message = r?.started === false ? `Backstory: ${r.message ?? "reindexing did not start"}.` : "Backstory: reindexing started.";
      selfTest.write("reindex", { result: r, message });
      void vscode.window.showInformationMessage(message);
    } catch (e) {
      await fail("reindex", e);
    }
  };

  const showStatus = async () => {
    try {
      const uri = activeUri();
      const status = await client.request<unknown>(ServerCommands.status, uri ? { uri } : {});
      output.info(`status: ${JSON.stringify(status, null, 2)}`);
      const summary = summarizeStatus(status);
      selfTest.write("statusCommand", { status, summary });
      const pick = await vscode.window.showInformationMessage(summary, "Reindex", "Show Output");
      if (pick === "Reindex") await reindex();
      if (pick === "Show Output") output.show(true);
    } catch (e) {
      const last = s.status.last;
      await fail(`status (last known: ${last.state ?? "unknown"}${last.message ? ", " + last.message : ""})`, e);
    }
  };

  const showCommit = async (arg?: { sha: string; path?: string; newStart?: number; uri?: string }) => {
    if (!arg?.sha) return;
    await openCommit({ shortSha: arg.sha.slice(0, 7), subject: "", provenance: "", ...arg });
  };

  return [
    vscode.commands.registerCommand(UiCommands.findPriorArt, findPriorArt),
    vscode.commands.registerCommand(UiCommands.symbolHistory, symbolHistory),
    vscode.commands.registerCommand(UiCommands.search, search),
    vscode.commands.registerCommand(UiCommands.reindex, reindex),
    vscode.commands.registerCommand(UiCommands.showStatus, showStatus),
    vscode.commands.registerCommand(UiCommands.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(UiCommands.restart, () => client.restart()),
    vscode.commands.registerCommand(UiCommands.openCommit, showCommit),
  ];
}
