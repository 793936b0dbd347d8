// Starting, stopping and talking to the `backstory serve` language server.
import { spawn } from "node:child_process";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  WorkDoneProgressCancelNotification,
  State,
  TransportKind,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import { SECTION, serverSection, type Settings } from "./config";
import { HOVER_COMMANDS, STATUS_NOTIFICATION, type StatusNotification } from "./protocol";
import type { SelfTest } from "./selftest";
import { REINSTALL_FIX, resolveServer } from "./server";
import type { StatusBar } from "./status";

/** The value for a `workspace/configuration` item: the whole section, or a dotted key inside it. */
function configValue(section: Record<string, unknown>, key: string | undefined): unknown {
  if (key === SECTION) return section;
  if (!key?.startsWith(SECTION + ".")) return undefined;
  let value: unknown = section;
  for (const part of key.slice(SECTION.length + 1).split(".")) {
    value = value && typeof value === "object" ? (value as Record<string, unknown>)[part] : undefined;
  }
  return value;
}

/** The settings editor at one setting: the remote (machine) settings when the window is remote (code-server,
 * SSH, containers), where machine-scoped settings such as backstory.server.path live; else the user settings. */
export async function openSetting(key: string): Promise<void> {
  const command = vscode.env.remoteName ? "workbench.action.openRemoteSettings" : "workbench.action.openSettings";
  try {
    await vscode.commands.executeCommand(command, { query: `@id:${key}` });
  } catch {
    await vscode.commands.executeCommand("workbench.action.openSettings", key);
  }
}

export class BackstoryClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private crashes: number[] = [];
  /** The server's indexing progress token, while it indexes (to cancel it). */
  private progressToken: string | number | undefined;

  constructor(
    private readonly settings: () => Settings,
    private readonly output: vscode.LogOutputChannel,
    private readonly status: StatusBar,
    private readonly selfTest: SelfTest,
  ) {}

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  async start(): Promise<void> {
    const settings = this.settings();
    const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file");
    const resolved = resolveServer(settings.server, {
      workspaceFolders: folders.map((f) => f.uri.fsPath),
      pathEnv: process.env.PATH,
    });
    if ("error" in resolved) return this.failed(resolved.error, resolved.fix);
    this.output.info(`Starting ${resolved.command} ${resolved.args.join(" ")} --stdio (from ${resolved.source})`);

    const serverOptions: ServerOptions = {
      command: resolved.command,
      args: resolved.args,
      transport: TransportKind.stdio,
      options: { cwd: resolved.cwd, env: { ...process.env, PYTHONUNBUFFERED: "1" } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }],
      outputChannel: this.output,
      // the hover's command links (open a change, its diff, all changes, prior art) may run these commands only
      markdown: { isTrusted: { enabledCommands: HOVER_COMMANDS }, supportHtml: false },
      initializationOptions: serverSection(settings),
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          const now = Date.now();
          this.crashes = [...this.crashes.filter((t) => now - t < 180_000), now];
          if (this.crashes.length <= 3) return { action: CloseAction.Restart, handled: true };
          void this.failed("the Backstory language server stopped 4 times in 3 minutes (see Backstory: Show Output).", REINSTALL_FIX);
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
      middleware: {
        workspace: {
          // workspace/configuration: answer the `backstory` section in the documented shape.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) return answers;
            const section = serverSection(this.settings());
            return params.items.map((item, i) => configValue(section, item.section) ?? answers[i]);
          },
        },
        // Indexing progress is shown by the Backstory status bar item (from backstory/status, one line with
        // units); VS Code's own progress item would only repeat it. Its token is kept so indexing can be cancelled.
        handleWorkDoneProgress: (token, params, next) => {
          if (params.kind === "begin") this.progressToken = token;
          if (params.kind === "end") {
            if (this.progressToken === token) this.progressToken = undefined;
            next(token, params);
          }
        },
        provideHover: async (document, position, token, next) => {
          if (!this.settings().hoverEnabled) return undefined;
          const hover = await next(document, position, token);
          this.selfTest.write("hover", {
            uri: document.uri.toString(),
            position: { line: position.line, character: position.character },
            contents: (hover?.contents ?? []).map((c) => (typeof c === "string" ? c : c.value)),
          });
          return hover;
        },
      },
    };
    const client = new LanguageClient("backstory", "Backstory", serverOptions, clientOptions);
    client.onNotification(STATUS_NOTIFICATION, (s: StatusNotification) => {
      this.status.update(s);
      this.selfTest.write("status", { status: s });
    });
    this.client = client;
    this.status.update({ state: "starting", message: "Starting the Backstory server…" });
    try {
      await client.start();
      this.selfTest.write("started", { command: resolved.command, args: resolved.args });
    } catch (e) {
      this.client = undefined;
      await client.dispose().catch(() => undefined);
      const said = await this.diagnose(resolved.command, resolved.args, resolved.cwd);
      const why = e instanceof Error ? e.message : String(e);
      return this.failed(
        `the Backstory language server (${resolved.command}) ${said ? `exited: ${said}` : `did not start (${why})`}.`,
        REINSTALL_FIX,
      );
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) await client.dispose(5000).catch((e) => this.output.warn(`stopping the server: ${e}`));
  }

  async restart(): Promise<void> {
    await this.stop();
    this.crashes = [];
    await this.start();
  }

  /** Runs a server command (workspace/executeCommand) with its one object argument. */
  async request<T>(command: string, arg: object): Promise<T> {
    if (!this.client || !this.running) {
      throw new Error("the Backstory server is not running. Check Backstory: Show Output, or run Backstory: Restart Server.");
    }
    this.output.debug(`${command} ${JSON.stringify(arg)}`);
    return (await this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] })) as T;
  }

  /** Whether the server is indexing with a progress that can be cancelled. */
  get canCancelIndexing(): boolean {
    return this.progressToken !== undefined && this.running;
  }

  /** Ask the server to stop indexing (it stops between batches; the next run resumes). */
  async cancelIndexing(): Promise<void> {
    if (this.client && this.progressToken !== undefined) {
      await this.client.sendNotification(WorkDoneProgressCancelNotification.type, { token: this.progressToken });
    }
  }

  toServerUri(uri: vscode.Uri): string {
    return this.client ? this.client.code2ProtocolConverter.asUri(uri) : uri.toString();
  }

  /** After a failed start: run the server once more with stdin closed; the last line it printed on stderr. */
  private diagnose(command: string, args: string[], cwd: string | undefined): Promise<string | undefined> {
    return new Promise((resolve) => {
      let stderr = "";
      const child = spawn(command, [...args, "--stdio"], { cwd, stdio: ["pipe", "ignore", "pipe"] });
      const timer = setTimeout(() => child.kill("SIGKILL"), 8000);
      child.stderr?.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
      child.on("error", (e) => {
        clearTimeout(timer);
        resolve(e.message);
      });
      child.on("close", () => {
        clearTimeout(timer);
        stderr = stderr.trim();
        if (stderr) this.output.error(`${command} ${args.join(" ")} --stdio printed:\n${stderr}`);
        resolve(stderr.split("\n").filter((l) => l.trim()).pop()?.trim().slice(0, 300));
      });
      child.stdin?.end();
    });
  }

  /** One message: what is wrong and how to fix it, with buttons to the setting and the log. */
  private async failed(problem: string, fix: string): Promise<void> {
    const message = `Backstory: ${problem} ${fix}`;
    this.output.error(message);
    this.status.update({ state: "error", message });
    this.selfTest.write("error", { message });
    const pick = await vscode.window.showErrorMessage(message, "Open Settings", "Show Output");
    this.selfTest.write("errorAction", { pick: pick ?? null });
    if (pick === "Open Settings") await openSetting("backstory.server.path");
    if (pick === "Show Output") this.output.show(true);
  }

  dispose(): void {
    void this.stop();
  }
}
