// The status bar item: indexing progress and freshness from the server's `backstory/status` notification.
import * as vscode from "vscode";
import type { StatusNotification } from "./protocol";
import { UiCommands } from "./protocol";
import { statusView } from "./statusText";

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("backstory.status", vscode.StatusBarAlignment.Left, 10);
  last: StatusNotification = { state: "starting", message: "Starting the Backstory server…" };

  constructor() {
    this.item.name = "Backstory";
    this.item.command = UiCommands.showStatus;
    this.update(this.last);
    this.item.show();
  }

  update(s: StatusNotification): void {
    this.last = s;
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
