// Read-only documents `backstory-rev:/<short sha>/<path>?rev=<sha>&path=<path>` holding a file as it was in a
// commit (or its parent, `rev=<sha>^`), backed by the server's backstory.fileAtRevision; they are both sides of
// VS Code's native side-by-side diff of a commit's file, and "Open File at Revision".
import * as path from "node:path";
import * as vscode from "vscode";
import { shortTitle } from "./picker";
import type { FileAtRevision } from "./protocol";

export const REV_SCHEME = "backstory-rev";
const MAX_CACHED = 100;

export interface FileChange {
  sha: string;
  shortSha?: string;
  subject?: string;
  /** The file's path in the commit (for a deletion: the path it had). */
  path: string;
  /** Its path in the parent, when the commit renamed it. */
  oldPath?: string;
  /** A document of the workspace the request came from (selects the repository). */
  uri?: string;
}

export class RevisionDocuments implements vscode.TextDocumentContentProvider {
  private readonly cache = new Map<string, FileAtRevision>();

  constructor(private readonly fileAt: (arg: { sha: string; path: string; uri?: string }) => Promise<FileAtRevision>) {}

  /** The URI of `file` at revision `rev` (a sha, or `<sha>^` for its parent); the path shows the short sha. */
  static uriFor(rev: string, file: string, originUri?: string): vscode.Uri {
    const short = rev.replace(/^([0-9a-f]{7})[0-9a-f]*/i, "$1");
    const query = new URLSearchParams({ rev, path: file });
    if (originUri) query.set("uri", originUri);
    return vscode.Uri.from({ scheme: REV_SCHEME, path: `/${short}/${file}`, query: query.toString() });
  }

  async load(uri: vscode.Uri): Promise<FileAtRevision> {
    const key = uri.toString();
    const cached = this.cache.get(key);
    if (cached) return cached;
    const q = new URLSearchParams(uri.query);
    const rev = q.get("rev");
    const file = q.get("path");
    if (!rev || !file) throw new Error(`not a Backstory revision URI: ${key}`);
    const origin = q.get("uri");
    const result = await this.fileAt({ sha: rev, path: file, ...(origin ? { uri: origin } : {}) });
    if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(key, result);
    return result;
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    return (await this.load(uri)).text;
  }

  /** The commit's change to one file as VS Code's side-by-side diff (parent ↔ commit). */
  async openChanges(change: FileChange): Promise<{ left: vscode.Uri; right: vscode.Uri; title: string }> {
    const left = RevisionDocuments.uriFor(`${change.sha}^`, change.oldPath ?? change.path, change.uri);
    const right = RevisionDocuments.uriFor(change.sha, change.path, change.uri);
    const short = change.shortSha ?? change.sha.slice(0, 7);
    const subject = change.subject ? ` ${shortTitle(change.subject, 48)}` : "";
    const title = `${path.posix.basename(change.path)} (${short})${subject}`;
    await vscode.commands.executeCommand("vscode.diff", left, right, title, { preview: true });
    return { left, right, title };
  }

  /** The file as it was in the commit, in an editor of its own (syntax-highlighted by its extension). */
  async openFile(change: FileChange, line?: number): Promise<vscode.TextEditor> {
    const uri = RevisionDocuments.uriFor(change.sha, change.path, change.uri);
    const doc = await vscode.workspace.openTextDocument(uri);
    const at = line !== undefined ? new vscode.Range(Math.max(0, line - 1), 0, Math.max(0, line - 1), 0) : undefined;
    return vscode.window.showTextDocument(doc, { preview: true, ...(at ? { selection: at } : {}) });
  }

  clear(): void {
    this.cache.clear();
  }
}
