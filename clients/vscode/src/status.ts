// The status bar item: indexing progress (one line, with units) and freshness from the server's
// `backstory/status` notification; tells the user when a reindex they asked for has finished.
import * as vscode from "vscode";
import type { StatusNotification } from "./protocol";
import { UiCommands } from "./protocol";
import { reindexDone, statusView } from "./statusText";

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("backstory.status", vscode.StatusBarAlignment.Left, 10);
  last: StatusNotification = { state: "starting", message: "Starting the Backstory server…" };
  private reindexing: "no" | "asked" | "running" = "no";

  constructor(private readonly onReindexDone: (message: string, status: StatusNotification) => void = () => undefined) {
    this.item.name = "Backstory";
    this.item.command = UiCommands.showStatus;
    this.update(this.last);
    this.item.show();
  }

  /** Called before asking the server to reindex: its end (the first `ready`/`error` after an `indexing`) is
   * reported, whatever order the answer and the notifications arrive in. */
  expectReindex(): void {
    this.reindexing = this.last.state === "indexing" ? "running" : "asked";
  }

  /** The server did not start a reindex after all. */
  cancelReindex(): void {
    this.reindexing = "no";
  }

  update(s: StatusNotification): void {
    this.last = s;
    if (s.state === "indexing" && this.reindexing === "asked") this.reindexing = "running";
    if ((s.state === "ready" || s.state === "error") && this.reindexing === "running") {
      this.reindexing = "no";
      const message = reindexDone(s);
      this.onReindexDone(message, s);
      if (s.state === "error") void vscode.window.showWarningMessage(message);
      else void vscode.window.showInformationMessage(message);
    }
    const view = statusView(s);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip + "\n\nClick for the index status.";
    this.item.backgroundColor =
      view.level === "error"
        ? new vscode.ThemeColor("statusBarItem.errorBackground")
        : view.level === "warning"
          ? new vscode.ThemeColor("statusBarItem.warningBackground")
          : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
