// Backstory for VS Code: finds prior art in the repository's own git history through `backstory serve`.
import * as vscode from "vscode";
import { BackstoryClient } from "./client";
import { registerCommands } from "./commands";
import { CommitDocuments, SCHEME } from "./commitDocument";
import { RESTART_KEYS, SECTION, readSettings, type Settings } from "./config";
import { ServerCommands, type FileAtRevision, type ShowCommitResult } from "./protocol";
import { REV_SCHEME, RevisionDocuments } from "./revision";
import { SelfTest } from "./selftest";
import { StatusBar } from "./status";
import { ResultsTree } from "./tree";

let backstory: BackstoryClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const settings = (): Settings => readSettings(vscode.workspace.getConfiguration(SECTION));
  const output = vscode.window.createOutputChannel("Backstory", { log: true });
  const selfTest = new SelfTest(() => settings().testResultsFile);
  const status = new StatusBar((message, s) => selfTest.write("reindexDone", { message, status: s }));
  const client = new BackstoryClient(settings, output, status, selfTest);
  backstory = client;
  const commits = new CommitDocuments((arg) => client.request<ShowCommitResult>(ServerCommands.showCommit, arg));
  const revisions = new RevisionDocuments((arg) => client.request<FileAtRevision>(ServerCommands.fileAtRevision, arg));
  const tree = new ResultsTree(commits, (event, data) => selfTest.write(event, data));

  context.subscriptions.push(
    output,
    status,
    client,
    tree,
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, commits),
    vscode.workspace.registerTextDocumentContentProvider(REV_SCHEME, revisions),
    ...registerCommands({ client, settings, output, selfTest, status, commits, revisions, tree }),
    onSettingsChanged(async () => {
      output.info("Settings changed: restarting the Backstory server.");
      commits.clear();
      revisions.clear();
      await client.restart();
    }),
  );

  selfTest.write("activated", { version: context.extension.packageJSON.version as string, remoteName: vscode.env.remoteName ?? null });
  await client.start();
}

/** Calls `restart` once, 750 ms after the last change to a setting that needs a new server. */
function onSettingsChanged(restart: () => Promise<void>): vscode.Disposable {
  let timer: NodeJS.Timeout | undefined;
  const listener = vscode.workspace.onDidChangeConfiguration((e) => {
    if (!RESTART_KEYS.some((key) => e.affectsConfiguration(key))) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      void restart();
    }, 750);
  });
  return new vscode.Disposable(() => {
    if (timer) clearTimeout(timer);
    listener.dispose();
  });
}

export async function deactivate(): Promise<void> {
  await backstory?.stop();
  backstory = undefined;
}
