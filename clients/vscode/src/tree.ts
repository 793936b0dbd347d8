// The Backstory view: the last answer as a tree. "Prior art" (related commits) leads, "History of <symbol>"
// (the exact history) follows collapsed; each commit expands to the files it changed, and a file opens VS
// Code's native side-by-side diff of that file before/after the commit.
import * as path from "node:path";
import * as vscode from "vscode";
import { relativeDate } from "./age";
import type { CommitDocuments } from "./commitDocument";
import { changesAbout, exactItems, fateLine, partialNote, primaryHunk, shortSha, symbolName, target, whyLine } from "./picker";
import {
  UiCommands,
  type ChangesResult,
  type Meta,
  type PriorArtResult,
  type ResultItem,
  type SearchResult,
  type SymbolHistory,
} from "./protocol";
import { REV_SCHEME } from "./revision";

export interface GroupNode {
  kind: "group";
  label: string;
  description?: string;
  items: ResultItem[];
  expanded: boolean;
  origin?: string;
}

export interface CommitNode {
  kind: "commit";
  item: ResultItem;
  origin?: string;
}

export interface FileNode {
  kind: "file";
  commit: CommitNode;
  path: string;
  oldPath?: string;
  change?: string;
}

export type Node = GroupNode | CommitNode | FileNode;

const CHANGE_LETTER: Record<string, string> = { add: "A", modify: "M", delete: "D", rename: "R" };

export class ResultsTree implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private groups: GroupNode[] = [];
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<Node>;

  constructor(
    private readonly commits: CommitDocuments,
    private readonly log: (event: string, data: Record<string, unknown>) => void,
  ) {
    this.view = vscode.window.createTreeView("backstory.results", { treeDataProvider: this, showCollapseAll: true });
  }

  /** The groups shown, for the self-test. */
  get shown(): GroupNode[] {
    return this.groups;
  }

  private set(title: string, groups: GroupNode[], meta: Meta | undefined): void {
    this.groups = groups.filter((g) => g.items.length);
    this.view.description = title;
    this.view.message = partialNote(meta);
    const n = this.groups.reduce((sum, g) => sum + g.items.length, 0);
    this.view.badge = n ? { value: n, tooltip: `${title}: ${n} commit${n === 1 ? "" : "s"}` } : undefined;
    this.changed.fire(undefined);
    this.log("tree", {
      title,
      message: this.view.message ?? null,
      groups: this.groups.map((g) => ({ label: g.label, description: g.description, expanded: g.expanded, shas: g.items.map((i) => i.commit.sha) })),
    });
  }

  showPriorArt(res: PriorArtResult, origin: string | undefined, selection: boolean): void {
    const name = symbolName(res);
    const exact = exactItems(res);
    const seen = new Set(exact.map((i) => i.commit.sha));
    const related = (res.results ?? []).filter((i) => !seen.has(i.commit.sha));
    const about = selection ? "the selection" : (name ?? "the cursor");
    this.set(
      `prior art for ${about}`,
      [
        { kind: "group", label: "Prior art", description: count(related.length), items: related, expanded: true, origin },
        {
          kind: "group",
          label: name ? `History of ${name}` : "Exact history",
          description: count(exact.length, "change"),
          items: exact,
          expanded: related.length === 0,
          origin,
        },
      ],
      res._meta,
    );
  }

  showHistory(res: SymbolHistory, origin: string | undefined): void {
    const name = res.symbol?.name ?? "the symbol";
    const items = (res.commits ?? []).map((i) => ({ ...i, provenance: i.provenance ?? "EXACT" }));
    this.set(`history of ${name}`, [{ kind: "group", label: `History of ${name}`, description: count(items.length, "change"), items, expanded: true, origin }], res._meta);
  }

  showSearch(query: string, res: SearchResult, origin: string | undefined): void {
    const items = res.results ?? [];
    this.set(`“${query}”`, [{ kind: "group", label: `Results for “${query}”`, description: count(items.length), items, expanded: true, origin }], res._meta);
  }

  showChanges(res: ChangesResult, origin: string | undefined): void {
    const items = res.results ?? [];
    const about = changesAbout(res);
    this.set(`prior art for ${about}`, [{ kind: "group", label: "Prior art", description: count(items.length), items, expanded: true, origin }], res._meta);
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.kind === "group") {
      const item = new vscode.TreeItem(
        node.label,
        node.expanded ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed,
      );
      item.description = node.description;
      item.contextValue = "group";
      item.iconPath = new vscode.ThemeIcon(node.label.startsWith("History") ? "history" : "lightbulb");
      return item;
    }
    if (node.kind === "commit") {
      const c = node.item.commit;
      const item = new vscode.TreeItem(c.subject || "(no subject)", vscode.TreeItemCollapsibleState.Collapsed);
      const fate = fateLine(node.item);
      item.description = [shortSha(node.item), c.author?.name, relativeDate(c.date ?? c.commit_date), fate].filter((s) => !!s).join(" · ");
      const why = whyLine(node.item);
      item.tooltip = new vscode.MarkdownString(
        `**${escape(c.subject ?? "")}**\n\n${escape(shortSha(node.item))} · ${escape(c.author?.name ?? "")} · ${escape(c.date ?? "")}\n\n${escape(why)}` +
          (fate ? `\n\n${escape(fate)}` : ""),
      );
      item.contextValue = "commit";
      item.iconPath = new vscode.ThemeIcon("git-commit");
      item.command = { command: UiCommands.openCommit, title: "Open Commit", arguments: [{ ...target(node.item), uri: node.origin }] };
      return item;
    }
    const item = new vscode.TreeItem(path.posix.basename(node.path), vscode.TreeItemCollapsibleState.None);
    const dir = path.posix.dirname(node.path);
    const letter = CHANGE_LETTER[node.change ?? ""] ?? "";
    item.description = [dir === "." ? "" : dir, letter].filter((s) => !!s).join(" · ");
    item.resourceUri = vscode.Uri.from({ scheme: REV_SCHEME, path: `/${node.path}` });
    item.tooltip = `${node.oldPath && node.oldPath !== node.path ? `${node.oldPath} → ` : ""}${node.path}: open the changes side by side`;
    item.contextValue = "file";
    item.command = { command: UiCommands.openChanges, title: "Open Changes", arguments: [fileArg(node)] };
    return item;
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (!node) return this.groups;
    if (node.kind === "group") return node.items.map((item) => ({ kind: "commit", item, origin: node.origin }));
    if (node.kind === "file") return [];
    let files: { path: string; old_path?: string; change?: string }[] = [];
    try {
      files = (await this.commits.get(node.item.commit.sha, node.origin)).files ?? [];
    } catch {
      files = [];
    }
    if (!files.length) {
      const seen = new Set<string>();
      for (const h of node.item.hunks ?? []) {
        if (!seen.has(h.path)) files.push({ path: h.path, old_path: h.old_path ?? undefined, change: h.change });
        seen.add(h.path);
      }
    }
    const best = primaryHunk(node.item)?.path;
    files.sort((a, b) => Number(b.path === best) - Number(a.path === best));
    const children: FileNode[] = files.map((f) => ({ kind: "file", commit: node, path: f.path, oldPath: f.old_path, change: f.change }));
    this.log("treeFiles", { sha: node.item.commit.sha, files: children.map((f) => f.path) });
    return children;
  }

  dispose(): void {
    this.view.dispose();
    this.changed.dispose();
  }
}

export function fileArg(node: FileNode): Record<string, unknown> {
  const c = node.commit.item.commit;
  return {
    sha: c.sha,
    shortSha: shortSha(node.commit.item),
    subject: c.subject ?? "",
    path: node.path,
    ...(node.oldPath && node.oldPath !== node.path ? { oldPath: node.oldPath } : {}),
    ...(node.commit.origin ? { uri: node.commit.origin } : {}),
  };
}

function count(n: number, what = "commit"): string {
  return `${n.toLocaleString("en-US")} ${what}${n === 1 ? "" : "s"}`;
}

function escape(s: string): string {
  return s.replace(/[\\`*_[\]<>#|~]/g, (c) => "\\" + c);
}
