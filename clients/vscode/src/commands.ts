// The user-facing commands (palette, editor context menu, the Backstory view, and the client-side commands
// carried by the server's code actions and hover links) and the results picker.
import * as vscode from "vscode";
import type { BackstoryClient } from "./client";
import type { CommitDocuments } from "./commitDocument";
import type { Settings } from "./config";
import {
  changesAbout,
  changesEmptyMessage,
  changesEntries,
  emptyMessage,
  historyEntries,
  partialNote,
  priorArtEntries,
  searchEntries,
  symbolName,
  type CommitTarget,
  type PickEntry,
} from "./picker";
import {
  ServerCommands,
  UiCommands,
  type ChangesArg,
  type ChangesResult,
  type LocationArg,
  type Meta,
  type PriorArtResult,
  type SearchResult,
  type SymbolHistory,
} from "./protocol";
import type { FileChange, RevisionDocuments } from "./revision";
import type { SelfTest } from "./selftest";
import type { StatusBar } from "./status";
import { summarizeStatus } from "./statusText";
import { fileArg, type FileNode, type ResultsTree } from "./tree";

export interface Services {
  client: BackstoryClient;
  settings: () => Settings;
  output: vscode.LogOutputChannel;
  selfTest: SelfTest;
  status: StatusBar;
  commits: CommitDocuments;
  revisions: RevisionDocuments;
  tree: ResultsTree;
}

interface Item extends vscode.QuickPickItem {
  entry: PickEntry;
}

const OPEN_CHANGES_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon("diff"), tooltip: "Open Changes (side by side)" };

function isLocationArg(a: unknown): a is LocationArg {
  if (!a || typeof a !== "object") return false;
  const o = a as Record<string, unknown>;
  return typeof o.uri === "string" && (typeof o.position === "object" || typeof o.range === "object");
}

function isFileNode(a: unknown): a is FileNode {
  return !!a && typeof a === "object" && (a as { kind?: unknown }).kind === "file";
}

export function registerCommands(s: Services): vscode.Disposable[] {
  const { client, output, selfTest } = s;

  /** `{uri, position}` / `{uri, range}` from a code action's or hover link's argument, else the active editor. */
  function location(arg: unknown): LocationArg | undefined {
    if (isLocationArg(arg)) return { ...arg };
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== "file") return undefined;
    const uri = client.toServerUri(editor.document.uri);
    const sel = editor.selection;
    const pos = (p: vscode.Position) => ({ line: p.line, character: p.character });
    return sel.isEmpty ? { uri, position: pos(sel.active) } : { uri, range: { start: pos(sel.start), end: pos(sel.end) } };
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

  async function openCommit(t: CommitTarget & { uri?: string }): Promise<void> {
    try {
      const { editor, line } = await s.commits.open(t);
      const doc = editor.document;
      selfTest.write("open", {
        uri: doc.uri.toString(),
        languageId: doc.languageId,
        sha: t.sha,
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

  async function openChanges(change: FileChange): Promise<void> {
    try {
      if (!change.subject) change.subject = (await s.commits.get(change.sha, change.uri)).title?.replace(/^\S+\s/, "") ?? "";
      const { left, right, title } = await s.revisions.openChanges(change);
      const tab = vscode.window.tabGroups.activeTabGroup.activeTab;
      const [before, after] = await Promise.all([s.revisions.load(left), s.revisions.load(right)]);
      selfTest.write("diff", {
        sha: change.sha,
        path: change.path,
        title,
        tabLabel: tab?.label ?? null,
        isDiff: tab?.input instanceof vscode.TabInputTextDiff,
        left: left.toString(),
        right: right.toString(),
        before: before.text.slice(0, 20000),
        after: after.text.slice(0, 20000),
      });
    } catch (e) {
      await fail("opening the changes", e);
    }
  }

  async function openFileAtRevision(arg?: unknown): Promise<void> {
    const change = isFileNode(arg) ? (fileArg(arg) as unknown as FileChange) : (arg as FileChange | undefined);
    if (!change?.sha || !change.path) return;
    try {
      const editor = await s.revisions.openFile(change);
      selfTest.write("file", { uri: editor.document.uri.toString(), languageId: editor.document.languageId, sha: change.sha, path: change.path });
    } catch (e) {
      await fail("opening the file at that revision", e);
    }
  }

  /** Shows a busy picker at once, fills it when the answer arrives; a chosen commit opens at its change. */
  async function showPicker<T extends { _meta?: Meta }>(
    command: string,
    title: string,
    answer: Promise<T>,
    entries: (t: T) => PickEntry[],
    empty: (t: T) => string,
    originUri?: string,
    via = "palette",
    titleOf?: (t: T) => string,
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
    const show = (list: PickEntry[], listTitle: string, placeholder: string) => {
      qp.title = listTitle;
      qp.items = list.map((entry) =>
        entry.kind === "separator"
          ? { label: entry.label, kind: vscode.QuickPickItemKind.Separator, entry }
          : {
              label: entry.label,
              description: entry.description,
              detail: entry.detail,
              entry,
              ...(entry.target?.path ? { buttons: [OPEN_CHANGES_BUTTON] } : {}),
            },
      );
      qp.placeholder = placeholder;
      qp.busy = false;
    };
    qp.onDidTriggerItemButton((e) => {
      const t = e.item.entry.target;
      qp.hide();
      if (t?.path) void openChanges({ sha: t.sha, shortSha: t.shortSha, subject: t.subject, path: t.path, oldPath: t.oldPath, uri: originUri });
    });
    const answered: { partial?: string } = {};
    qp.onDidAccept(() => {
      const entry = qp.selectedItems[0]?.entry;
      if (entry?.group) {
        const { title: groupTitle, entries: groupEntries } = entry.group;
        const note = answered.partial;
        selfTest.write("picker", { command, via: "group", title: groupTitle, items: describe(groupEntries), placeholder: note ?? null });
        show(groupEntries, `Backstory: ${groupTitle}${note ? " (partial)" : ""}`, note ?? "Pick a commit to open it at the change");
        return;
      }
      const chosen = entry?.target;
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
    const partial = partialNote(result._meta);
    answered.partial = partial;
    const shownTitle = titleOf ? titleOf(result) : title;
    const fullTitle = partial ? `${shownTitle} (partial)` : shownTitle;
    selfTest.write("picker", { command, via, title: fullTitle, items: describe(list), placeholder: partial ?? null });
    if (hidden) return;
    if (!list.some((e) => e.kind !== "separator")) {
      qp.hide();
      const message = empty(result);
      selfTest.write("empty", { command, message });
      void vscode.window.showInformationMessage(message);
      return;
    }
    show(list, fullTitle, partial ?? "Pick a commit to open it at the change");
  }

  const k = () => s.settings().resultsCount;

  const findPriorArt = async (arg?: unknown) => {
    const loc = location(arg);
    if (!loc) return void vscode.window.showWarningMessage("Backstory: open a file and place the cursor on a symbol first.");
    const call = client.request<PriorArtResult>(ServerCommands.findPriorArt, { k: k(), ...loc });
    void call.then((r) => s.tree.showPriorArt(r, loc.uri, !!loc.range), () => undefined);
    const title = loc.range ? "Backstory: prior art for the selection" : "Backstory: prior art";
    await showPicker(
      ServerCommands.findPriorArt,
      title,
      call,
      (r) => priorArtEntries(r),
      (r) => emptyMessage("prior art found", r),
      loc.uri,
      isLocationArg(arg) ? "codeAction" : "editor",
      (r) => (loc.range ? title : symbolName(r) ? `Backstory: prior art for ${symbolName(r)}` : title),
    );
  };

  const symbolHistory = async (arg?: unknown) => {
    const loc = location(arg);
    if (!loc) return void vscode.window.showWarningMessage("Backstory: open a file and place the cursor on a symbol first.");
    const position = loc.position ?? loc.range?.start;
    const call = client.request<SymbolHistory>(ServerCommands.symbolHistory, { uri: loc.uri, position });
    void call.then((r) => s.tree.showHistory(r, loc.uri), () => undefined);
    await showPicker(
      ServerCommands.symbolHistory,
      "Backstory: symbol history",
      call,
      (r) => historyEntries(r),
      (r) => emptyMessage("history for this symbol", r),
      loc.uri,
      isLocationArg(arg) ? "codeAction" : "editor",
      (r) => (r.symbol?.name ? `Backstory: history of ${r.symbol.name}` : "Backstory: symbol history"),
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
    const q = query;
    void call.then((r) => s.tree.showSearch(q, r, uri), () => undefined);
    await showPicker(ServerCommands.search, `Backstory: “${query}”`, call, (r) => searchEntries(r), (r) => emptyMessage("matching commits", r), uri, "input");
  };

  /**
   * Prior art for the uncommitted changes of the workspace's repository: from the palette (the active file's
   * repository, else the first folder's) or the Source Control view's title (that repository).
   */
  const findPriorArtForChanges = async (arg?: unknown) => {
    const root = (arg as { rootUri?: unknown } | undefined)?.rootUri;
    const uri = root instanceof vscode.Uri ? client.toServerUri(root) : activeUri();
    const request: ChangesArg = { k: k(), ...(uri ? { uri } : {}) };
    const call = client.request<ChangesResult>(ServerCommands.findPriorArtForChanges, request);
    void call.then((r) => s.tree.showChanges(r, uri), () => undefined);
    await showPicker(
      ServerCommands.findPriorArtForChanges,
      "Backstory: prior art for your changes",
      call,
      (r) => changesEntries(r),
      (r) => changesEmptyMessage(r),
      uri,
      root instanceof vscode.Uri ? "scm" : "palette",
      (r) => `Backstory: prior art for ${changesAbout(r)}`,
    );
  };

  const reindex = async () => {
    try {
      const uri = activeUri();
      s.status.expectReindex();
      const r = await client.request<{ started?: boolean; message?: string | null }>(ServerCommands.reindex, uri ? { uri } : {});
      const started = r?.started !== false;
      const message = started ? "Backstory: reindexing started; you will be told when it is done." : `Backstory: ${r.message ?? "reindexing did not start"}.`;
      if (!started) s.status.cancelReindex();
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
      const actions = client.canCancelIndexing ? ["Cancel Indexing", "Show Output"] : ["Reindex", "Show Output"];
      const pick = await vscode.window.showInformationMessage(summary, ...actions);
      if (pick === "Cancel Indexing") await client.cancelIndexing();
      if (pick === "Reindex") await reindex();
      if (pick === "Show Output") output.show(true);
    } catch (e) {
      const last = s.status.last;
      await fail(`status (last known: ${last.state ?? "unknown"}${last.message ? ", " + last.message : ""})`, e);
    }
  };

  const showCommit = async (arg?: { sha: string; path?: string; newStart?: number; uri?: string; subject?: string; shortSha?: string }) => {
    if (!arg?.sha) return;
    let subject = arg.subject;
    if (subject === undefined) {
      subject = await s.commits.get(arg.sha, arg.uri).then((r) => r.title?.replace(/^\S+\s/, "") ?? "", () => "");
    }
    await openCommit({ provenance: "", ...arg, shortSha: arg.shortSha ?? arg.sha.slice(0, 7), subject });
  };

  const openChangesCommand = async (arg?: unknown) => {
    const change = isFileNode(arg) ? (fileArg(arg) as unknown as FileChange) : (arg as FileChange | undefined);
    if (!change?.sha || !change.path) return;
    await openChanges({ ...change });
  };

  return [
    vscode.commands.registerCommand(UiCommands.findPriorArt, findPriorArt),
    vscode.commands.registerCommand(UiCommands.symbolHistory, symbolHistory),
    vscode.commands.registerCommand(UiCommands.findPriorArtForChanges, findPriorArtForChanges),
    vscode.commands.registerCommand(UiCommands.search, search),
    vscode.commands.registerCommand(UiCommands.reindex, reindex),
    vscode.commands.registerCommand(UiCommands.showStatus, showStatus),
    vscode.commands.registerCommand(UiCommands.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(UiCommands.restart, () => client.restart()),
    vscode.commands.registerCommand(UiCommands.openCommit, showCommit),
    vscode.commands.registerCommand(UiCommands.openChanges, openChangesCommand),
    vscode.commands.registerCommand(UiCommands.openFileAtRevision, openFileAtRevision),
    vscode.commands.registerCommand(UiCommands.showView, () => vscode.commands.executeCommand("backstory.results.focus")),
  ];
}

function describe(list: PickEntry[]): Record<string, unknown>[] {
  return list.map((e) => ({
    kind: e.kind,
    label: e.label,
    description: e.description,
    detail: e.detail,
    sha: e.target?.sha,
    provenance: e.target?.provenance,
    group: e.group ? { title: e.group.title, shas: e.group.entries.map((g) => g.target?.sha) } : undefined,
  }));
}
