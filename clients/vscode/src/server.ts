// Finding the `backstory` executable and building its command line. No "vscode" import: unit-tested.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export interface ServerSettings {
  /** backstory.server.path: a `backstory` executable or a python interpreter; "" = find it. */
  path: string;
  /** backstory.server.args: appended after `serve`. */
  args: string[];
}

export interface ResolveEnv {
  workspaceFolders: string[];
  pathEnv?: string;
  home?: string;
  platform?: NodeJS.Platform;
  isExecutable?: (p: string) => boolean;
}

export interface ResolvedServer {
  command: string;
  /** Arguments without the `--stdio` that the language client's stdio transport appends. */
  args: string[];
  cwd?: string;
  /** Where the executable came from, for the log. */
  source: "setting" | "workspace-venv" | "path";
}

export interface ResolveError {
  /** What is wrong, in one sentence. */
  error: string;
  /** How to fix it, in one sentence. */
  fix: string;
}

/** The install route from the repository's README, and the setting to set. */
export const INSTALL_FIX =
  "Install it from the Backstory repository (run ./scripts/setup there, or pip install <path to the repository>), " +
  "then set backstory.server.path to its backstory executable (.venv/bin/backstory).";

/** For a server that is installed but does not run. */
export const REINSTALL_FIX =
  "Reinstall it from the Backstory repository (./scripts/setup), or set backstory.server.path to a backstory executable that works.";

export function defaultIsExecutable(p: string): boolean {
  try {
    if (!fs.statSync(p).isFile()) return false;
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** python, python3, python3.11, python.exe, pythonw.exe, pypy3 … */
export function isPythonInterpreter(p: string): boolean {
  const base = (p.split(/[\\/]/).pop() ?? "").toLowerCase();
  return /^(python|pypy)(\d+(\.\d+)*)?w?(\.exe)?$/.test(base);
}

/** Expands `~`, `${workspaceFolder}`, `${userHome}` and `${env:NAME}`; resolves relative paths against the first folder. */
export function expandPath(p: string, env: ResolveEnv): string {
  const home = env.home ?? os.homedir();
  const folder = env.workspaceFolders[0];
  let out = p.trim();
  out = out.replace(/\$\{userHome\}/g, home);
  out = out.replace(/\$\{env:([^}]+)\}/g, (_m, name: string) => process.env[name] ?? "");
  if (folder) out = out.replace(/\$\{workspaceFolder\}/g, folder);
  if (out === "~") out = home;
  else if (out.startsWith("~/")) out = path.join(home, out.slice(2));
  if (!path.isAbsolute(out) && hasSeparator(out) && folder) out = path.resolve(folder, out);
  return out;
}

function hasSeparator(p: string): boolean {
  return p.includes("/") || p.includes("\\");
}

/** Looks a bare command name up on PATH. */
export function which(name: string, env: ResolveEnv): string | undefined {
  const isExe = env.isExecutable ?? defaultIsExecutable;
  const win = (env.platform ?? process.platform) === "win32";
  const exts = win ? ["", ".exe", ".cmd", ".bat"] : [""];
  const delimiter = win ? ";" : ":";
  for (const dir of (env.pathEnv ?? "").split(delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (isExe(candidate)) return candidate;
    }
  }
  return undefined;
}

/** The command line for an executable: `backstory serve …` or `python -m backstory serve …`. */
export function commandLine(executable: string, extraArgs: string[]): string[] {
  const serve = ["serve", ...extraArgs];
  return isPythonInterpreter(executable) ? ["-m", "backstory", ...serve] : serve;
}

export function resolveServer(settings: ServerSettings, env: ResolveEnv): ResolvedServer | ResolveError {
  const isExe = env.isExecutable ?? defaultIsExecutable;
  const win = (env.platform ?? process.platform) === "win32";
  const cwd = env.workspaceFolders[0];
  const args = settings.args ?? [];
  const configured = (settings.path ?? "").trim();

  if (configured) {
    const expanded = expandPath(configured, env);
    const exe = hasSeparator(expanded) ? (isExe(expanded) ? expanded : undefined) : which(expanded, env);
    if (!exe) {
      return {
        error:
          `backstory.server.path is "${configured}", which is not an executable file` +
          (expanded !== configured ? ` (resolved to ${expanded})` : "") +
          ".",
        fix: INSTALL_FIX,
      };
    }
    return { command: exe, args: commandLine(exe, args), cwd, source: "setting" };
  }

  for (const folder of env.workspaceFolders) {
    const candidates = win
      ? [path.join(folder, ".venv", "Scripts", "backstory.exe")]
      : [path.join(folder, ".venv", "bin", "backstory")];
    for (const c of candidates) {
      if (isExe(c)) return { command: c, args: commandLine(c, args), cwd: folder, source: "workspace-venv" };
    }
  }

  const onPath = which("backstory", env);
  if (onPath) return { command: onPath, args: commandLine(onPath, args), cwd, source: "path" };

  return {
    error: "the Backstory language server (backstory) is not in a workspace .venv or on PATH.",
    fix: INSTALL_FIX,
  };
}
