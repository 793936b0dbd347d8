// Starting, stopping and talking to the `backstory serve` language server.
import { spawn } from "node:child_process";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  State,
  TransportKind,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import { SECTION, serverSection, type Settings } from "./config";
import { STATUS_NOTIFICATION, type StatusNotification } from "./protocol";
import type { SelfTest } from "./selftest";
import { resolveServer } from "./server";
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

export class BackstoryClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private crashes: number[] = [];

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
    if ("error" in resolved) return this.failed(resolved.error);
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
      initializationOptions: serverSection(settings),
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          const now = Date.now();
          this.crashes = [...this.crashes.filter((t) => now - t < 180_000), now];
          if (this.crashes.length <= 3) return { action: CloseAction.Restart, handled: true };
          void this.failed("it exited 4 times in 3 minutes (see Backstory: Show Output).");
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
      return this.failed(`${resolved.command} ${said ? `exited: ${said}` : `failed (${why})`} (see Backstory: Show Output).`);
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

  private async failed(detail: string): Promise<void> {
    const message = `Backstory: the language server could not start: ${detail}`;
    this.output.error(message);
    this.status.update({ state: "error", message });
    this.selfTest.write("error", { message });
    const pick = await vscode.window.showErrorMessage(
      `${message} Set backstory.server.path to the \`backstory\` executable, or to a Python interpreter that has Backstory installed.`,
      "Open Settings",
      "Show Output",
    );
    if (pick === "Open Settings") await vscode.commands.executeCommand("workbench.action.openSettings", "backstory.server.path");
    if (pick === "Show Output") this.output.show(true);
  }

  dispose(): void {
    void this.stop();
  }
}
