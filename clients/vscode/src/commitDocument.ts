// Read-only documents `backstory:/<short sha> <subject>?sha=…` with a commit's header, message and diff (hunk
// headers carry the definition they changed), backed by the server's backstory.showCommit. They use the
// extension's own language `backstory-commit` (a diff grammar without bracket pairs, so an unmatched `)` in a
// diff line is not painted as an error).
import * as vscode from "vscode";
import { hunkLine, shortTitle, withHeaderLines, type CommitTarget } from "./picker";
import type { ShowCommitResult } from "./protocol";

export const SCHEME = "backstory";
export const COMMIT_LANGUAGE = "backstory-commit";
const MAX_CACHED = 50;

export interface OpenedCommit {
  editor: vscode.TextEditor;
  line: number;
}

export class CommitDocuments implements vscode.TextDocumentContentProvider {
  private readonly cache = new Map<string, ShowCommitResult>();

  constructor(private readonly showCommit: (arg: { sha: string; uri?: string }) => Promise<ShowCommitResult>) {}

  /** `/<short sha> <subject, cut at a word>`: the tab title; `fate`: header lines saying what became of it. */
  static uriFor(t: Pick<CommitTarget, "sha" | "shortSha" | "subject" | "fate">, originUri?: string): vscode.Uri {
    const subject = shortTitle(t.subject.replace(/[\\/:*?"<>|\n\r\t]+/g, " "), 50);
    const query = new URLSearchParams({ sha: t.sha });
    if (originUri) query.set("uri", originUri);
    if (t.fate?.length) query.set("fate", t.fate.join("\n"));
    return vscode.Uri.from({
      scheme: SCHEME,
      path: `/${t.shortSha || t.sha.slice(0, 7)}${subject ? " " + subject : ""}`,
      query: query.toString(),
    });
  }

  /** The commit's showCommit answer (cached): text, hunk positions and files. */
  async get(sha: string, originUri?: string): Promise<ShowCommitResult> {
    return this.load(CommitDocuments.uriFor({ sha, shortSha: sha.slice(0, 7), subject: "" }, originUri));
  }

  private async load(uri: vscode.Uri): Promise<ShowCommitResult> {
    const query = new URLSearchParams(uri.query);
    const sha = query.get("sha");
    if (!sha) throw new Error(`not a Backstory commit URI: ${uri.toString()}`);
    const key = sha;
    const cached = this.cache.get(key);
    if (cached) return cached;
    const arg: { sha: string; uri?: string } = { sha };
    const origin = query.get("uri");
    if (origin) arg.uri = origin;
    const result = await this.showCommit(arg);
    if (!result || typeof result.text !== "string") throw new Error(`backstory.showCommit returned no text for ${sha}`);
    if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(key, result);
    return result;
  }

  /** The showCommit answer as the document shows it: with the header lines the URI carries. */
  private async shown(uri: vscode.Uri): Promise<ShowCommitResult> {
    const fate = new URLSearchParams(uri.query).get("fate");
    return withHeaderLines(await this.load(uri), fate ? fate.split("\n") : []);
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    return (await this.shown(uri)).text;
  }

  /** Opens the commit and scrolls to the hunk the result matched. */
  async open(target: CommitTarget & { uri?: string }): Promise<OpenedCommit> {
    const uri = CommitDocuments.uriFor(target, target.uri);
    const result = await this.shown(uri);
    let doc = await vscode.workspace.openTextDocument(uri);
    if (doc.languageId !== COMMIT_LANGUAGE) doc = await vscode.languages.setTextDocumentLanguage(doc, COMMIT_LANGUAGE);
    const line = Math.min(Math.max(0, hunkLine(result.hunks, target.path, target.newStart)), Math.max(0, doc.lineCount - 1));
    const at = new vscode.Range(line, 0, line, 0);
    const editor = await vscode.window.showTextDocument(doc, { preview: true, selection: at });
    editor.revealRange(at, vscode.TextEditorRevealType.AtTop);
    return { editor, line };
  }

  clear(): void {
    this.cache.clear();
  }
}
