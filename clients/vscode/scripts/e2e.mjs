#!/usr/bin/env node
/* global document -- page.evaluate callbacks run in the browser */
// End-to-end test of the Backstory extension in real VS Code (code-server 4.100.3 = VS Code 1.100.3),
// driven by Debian's Chromium through playwright-core.
//
//   1. builds and packages the .vsix (npm run package)
//   2. creates a temporary git repository with known commits, authors and dates, indexes it with the CLI, adds
//      one more commit (so the index is behind) and holds the index's write lock (so the server cannot catch up)
//   3. installs the .vsix into a temporary extensions dir and starts code-server (detached, own process group)
//   4. in headless Chromium: Find Prior Art while the server waits for the lock (partial results are labelled
//      in the picker and the view), releases the lock, Reindex (its end is reported), then prior art first (the
//      exact history is one entry that opens a second list), the commit view (language without bracket
//      colouring, hunk headers with the definition, a readable tab title), hovers only on definitions and
//      resolved references, the hover's "Open changes" link (VS Code's native side-by-side diff), the Backstory
//      view (prior art, history, commits expandable to files, a file opens the diff), code actions, symbol
//      history, search, the status bar, a bad server path (one message with the fix; Open Settings lands on
//      the setting), a workspace folder that is a subfolder of the repository, and Find Prior Art for These
//      Changes on a clean worktree (the server's hint) and on an uncommitted edit
//   5. asserts on the extension's self-test JSON lines (backstory.test.resultsFile) and on the DOM, not pixels
//   6. saves screenshots (to $BACKSTORY_SCREENSHOTS when set, else clients/vscode/e2e-artifacts/) and kills
//      code-server's whole process group
//
// Environment: BACKSTORY_EXE (default <repo>/.venv/bin/backstory), BACKSTORY_TOOLS (default <repo>/.tools),
// CHROMIUM (default /usr/bin/chromium), E2E_SKIP_PACKAGE=1 (reuse dist/backstory.vsix), E2E_KEEP=1 (keep temp dir),
// E2E_TIMEOUT (seconds, default 600), BACKSTORY_SCREENSHOTS (a folder for the screenshots, e.g. docs/images).
import { spawn, spawnSync, execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXT_DIR = path.resolve(HERE, "..");
const REPO = path.resolve(EXT_DIR, "../..");
const TOOLS = process.env.BACKSTORY_TOOLS || path.join(REPO, ".tools");
const CODE_SERVER = path.join(TOOLS, "code-server", "node_modules", ".bin", "code-server");
const BACKSTORY_EXE = path.resolve(REPO, process.env.BACKSTORY_EXE || ".venv/bin/backstory");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const ARTIFACTS = path.join(EXT_DIR, "e2e-artifacts");
const VSIX = path.join(EXT_DIR, "dist", "backstory.vsix");
const TOTAL_TIMEOUT_S = Number(process.env.E2E_TIMEOUT || 600);
const SHOTS = process.env.BACKSTORY_SCREENSHOTS ? path.resolve(process.env.BACKSTORY_SCREENSHOTS) : ARTIFACTS;
const EXPECTED_SUBJECT = "Add retry with exponential backoff";

const t0 = Date.now();
const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
const log = (...a) => console.log(`[e2e ${elapsed()}]`, ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const checks = [];
function check(name, ok, info = "") {
  checks.push({ name, ok: !!ok });
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${info ? ` — ${info}` : ""}`);
  return !!ok;
}

// ---------------------------------------------------------------------------------------------------------
// cleanup: always kill code-server's process group (extension host and the Python server included)
let codeServer;
let browser;
let tmpRoot;
let lockHolder;
function killGroup(signal) {
  if (lockHolder?.pid) {
    try {
      lockHolder.kill("SIGKILL");
    } catch {
      /* already gone */
    }
  }
  if (codeServer?.pid) {
    try {
      process.kill(-codeServer.pid, signal);
    } catch {
      /* already gone */
    }
  }
}
function cleanupSync() {
  killGroup("SIGTERM");
  killGroup("SIGKILL");
  if (tmpRoot && !process.env.E2E_KEEP) fs.rmSync(tmpRoot, { recursive: true, force: true });
}
process.on("exit", cleanupSync);
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    console.error(`[e2e] ${sig}: cleaning up`);
    cleanupSync();
    process.exit(130);
  });
}

// ---------------------------------------------------------------------------------------------------------
function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", ...opts });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${r.status ?? r.signal}):\n${r.stdout ?? ""}${r.stderr ?? ""}`);
  }
  return r.stdout;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitFor(what, fn, timeoutMs, intervalMs = 250) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
}

// ---------------------------------------------------------------------------------------------------------
// The test repository
const CLIENT_V1 = `"""A tiny HTTP client."""
import urllib.request


def fetch(url):
    """Fetch a URL and return the body."""
    with urllib.request.urlopen(url) as response:
        return response.read()


def build_request(url):
    return urllib.request.Request(
        url,
        headers={"User-Agent": "demo"},
        method="GET",
        data=None,
        unverifiable=False,
    )
`;

const CLIENT_V2 = CLIENT_V1.replace(`"""A tiny HTTP client."""\n`, `"""A tiny HTTP client."""\nimport time\n`) + `

def fetch_with_retry(url, attempts=5, delay=0.5):
    """Fetch a URL, retrying with exponential backoff on network errors."""
    # try again after a growing delay
    for attempt in range(attempts):
        try:
            return fetch(url)
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay *= 2
`;

const CLIENT_V3 = CLIENT_V2.replace(`import time\n`, `import logging\nimport time\n`).replace(
  `            time.sleep(delay)\n`,
  `            logging.getLogger(__name__).warning("retrying %s in %.1fs", url, delay)\n            time.sleep(delay)\n`,
);
const CLIENT_V4 = CLIENT_V3.replace("unverifiable=False,", "unverifiable=True,");
const CLIENT_V5 = CLIENT_V4.replace("        except OSError:\n", "        except (OSError, TimeoutError):\n");
// an uncommitted edit (Find Prior Art for These Changes): another function that retries with backoff
const CHANGE = `

def post_with_retry(url, data, attempts=3, delay=1.0):
    """Post data, retrying with exponential backoff on network errors."""
    for attempt in range(attempts):
        try:
            return urllib.request.urlopen(build_request(url), data=data).read()
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay *= 2
`;

const COMMITS = [
  {
    author: ["Grace Hopper", "grace@example.com"],
    date: "2024-01-10T09:00:00+00:00",
    subject: "Initial project layout",
    files: { "README.md": "# demo\n\nA demo project.\n", "app/__init__.py": "", "app/client.py": CLIENT_V1 },
  },
  {
    author: ["Linus Torvalds", "linus@example.com"],
    date: "2024-02-01T10:30:00+00:00",
    subject: "Format dates in ISO 8601",
    files: {
      "app/dates.py": `import datetime\n\n\ndef format_date(d):\n    """Format a date as ISO 8601."""\n    return d.strftime("%Y-%m-%d")\n\n\ndef parse_date(text):\n    return datetime.datetime.strptime(text, "%Y-%m-%d").date()\n`,
    },
  },
  {
    author: ["Ada Lovelace", "ada@example.com"],
    date: "2024-03-05T14:15:00+00:00",
    subject: EXPECTED_SUBJECT,
    body: "Network calls fail transiently; retry them, doubling the delay after each failure.",
    files: { "app/client.py": CLIENT_V2 },
  },
  {
    author: ["Linus Torvalds", "linus@example.com"],
    date: "2024-04-12T08:00:00+00:00",
    subject: "Parse settings from an INI file",
    files: {
      "app/config.py": `import configparser\n\n\ndef load_settings(path):\n    """Read settings from an INI file."""\n    parser = configparser.ConfigParser()\n    parser.read(path)\n    return {s: dict(parser[s]) for s in parser.sections()}\n`,
    },
  },
  {
    author: ["Grace Hopper", "grace@example.com"],
    date: "2024-05-20T16:45:00+00:00",
    subject: "Add CSV export for reports",
    files: {
      "app/export.py": `import csv\n\n\ndef export_rows(rows, path):\n    """Write report rows to a CSV file."""\n    with open(path, "w", newline="") as f:\n        writer = csv.writer(f)\n        for row in rows:\n            writer.writerow(row)\n`,
    },
  },
  {
    author: ["Ada Lovelace", "ada@example.com"],
    date: "2024-06-02T11:20:00+00:00",
    subject: "Log each retry attempt",
    files: { "app/client.py": CLIENT_V3 },
  },
  {
    author: ["Grace Hopper", "grace@example.com"],
    date: "2024-06-20T09:10:00+00:00",
    subject: "Mark built requests as unverifiable",
    files: { "app/client.py": CLIENT_V4 },
  },
];
// made after the CLI indexed the others: the server has to index it (and cannot while the lock is held)
const LATE_COMMIT = {
  author: ["Ada Lovelace", "ada@example.com"],
  date: "2024-07-01T10:00:00+00:00",
  subject: "Retry on timeouts too",
  files: { "app/client.py": CLIENT_V5 },
};

function gitIn(dir) {
  return (args, env = {}) =>
    run("git", args, {
      cwd: dir,
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", ...env },
    });
}

function commit(dir, c) {
  const git = gitIn(dir);
  for (const [file, text] of Object.entries(c.files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
    git(["add", file]);
  }
  const [name, email] = c.author;
  const env = {
    GIT_AUTHOR_NAME: name,
    GIT_AUTHOR_EMAIL: email,
    GIT_AUTHOR_DATE: c.date,
    GIT_COMMITTER_NAME: name,
    GIT_COMMITTER_EMAIL: email,
    GIT_COMMITTER_DATE: c.date,
  };
  git(["commit", "-q", "-m", c.subject, ...(c.body ? ["-m", c.body] : [])], env);
}

function makeRepo(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const git = gitIn(dir);
  git(["init", "-q", "-b", "main"]);
  git(["config", "user.name", "Backstory E2E"]);
  git(["config", "user.email", "e2e@example.com"]);
  git(["config", "commit.gpgsign", "false"]);
  for (const c of COMMITS) commit(dir, c);
}

function shasOf(dir) {
  const lines = gitIn(dir)(["log", "--format=%H %s"]).trim().split("\n");
  return Object.fromEntries(lines.map((l) => [l.slice(41), l.slice(0, 40)]));
}

/** The 1-based line and column of `needle` in `text` (plus `offset` columns). */
function lineCol(text, needle, offset = 0) {
  const i = text.indexOf(needle);
  if (i < 0) throw new Error(`${needle} not in the text`);
  const line = text.slice(0, i).split("\n").length;
  const col = i - text.lastIndexOf("\n", i - 1) + offset;
  return [line, col];
}

// ---------------------------------------------------------------------------------------------------------
function readEvents(file) {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return { event: "unparseable", line: l };
      }
    });
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  for (const f of fs.readdirSync(ARTIFACTS)) fs.rmSync(path.join(ARTIFACTS, f), { recursive: true, force: true });
  fs.mkdirSync(SHOTS, { recursive: true });

  if (!fs.existsSync(CODE_SERVER)) throw new Error(`code-server is not installed at ${CODE_SERVER}: run scripts/setup-e2e.sh`);
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: run scripts/setup-e2e.sh`);

  // The server must at least start: `backstory serve --help`.
  const help = spawnSync(BACKSTORY_EXE, ["serve", "--help"], { encoding: "utf8", timeout: 60_000 });
  if (help.status !== 0) {
    throw new Error(
      `the Backstory server is not usable: \`${BACKSTORY_EXE} serve --help\` exited ${help.status ?? help.error ?? help.signal}\n` +
        `${(help.stderr || "").trim().split("\n").slice(-5).join("\n")}`,
    );
  }
  log(`server: ${BACKSTORY_EXE}`);

  if (!process.env.E2E_SKIP_PACKAGE || !fs.existsSync(VSIX)) {
    log("building and packaging the extension");
    run("npm", ["run", "--silent", "package"], { cwd: EXT_DIR });
  }
  if (!fs.existsSync(VSIX)) throw new Error(`no ${VSIX}`);

  tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "backstory-e2e-"));
  const dirs = Object.fromEntries(
    ["repo", "user-data", "extensions", "xdg-config", "xdg-data", "xdg-cache", "xdg-state", "tmp"].map((d) => [d, path.join(tmpRoot, d)]),
  );
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  const resultsFile = path.join(tmpRoot, "selftest.jsonl");
  const events = () => readEvents(resultsFile);
  const env = {
    ...process.env,
    XDG_CONFIG_HOME: dirs["xdg-config"],
    XDG_DATA_HOME: dirs["xdg-data"],
    XDG_CACHE_HOME: dirs["xdg-cache"],
    XDG_STATE_HOME: dirs["xdg-state"],
    TMPDIR: dirs.tmp,
  };
  delete env.VSCODE_IPC_HOOK_CLI;

  // the repository: indexed by the CLI up to the 7th commit, then one more commit the index does not have yet
  makeRepo(dirs.repo);
  log("indexing the test repository with the CLI (history only)");
  run(BACKSTORY_EXE, ["index", "--no-dense", dirs.repo], { env });
  commit(dirs.repo, LATE_COMMIT);
  const shas = shasOf(dirs.repo);
  const expectedSha = shas[EXPECTED_SUBJECT];
  log(`test repository ${dirs.repo}: ${Object.keys(shas).length} commits; expected ${expectedSha.slice(0, 7)}`);
  // another indexer holds the write lock: the server waits for it (and says it is indexing) until it is released
  const lockFile = path.join(dirs.repo, ".git", "backstory", "write.lock");
  const holder = "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(3600)\n";
  lockHolder = spawn("python3", ["-c", holder, lockFile], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve, reject) => {
    lockHolder.stdout.once("data", resolve);
    lockHolder.once("exit", (code) => reject(new Error(`the lock holder exited (${code})`)));
  });

  fs.mkdirSync(path.join(dirs["user-data"], "User"), { recursive: true });
  const settingsFile = path.join(dirs["user-data"], "User", "settings.json");
  const settings = {
    "backstory.server.path": BACKSTORY_EXE,
    "backstory.test.resultsFile": resultsFile,
    "backstory.results.count": 8,
    "backstory.rerank": true,
    "backstory.hover.enabled": true,
    "backstory.trace.server": "messages",
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "security.workspace.trust.enabled": false,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoUpdate": false,
    "extensions.autoCheckUpdates": false,
    "extensions.ignoreRecommendations": true,
    "git.enabled": false,
    "editor.hover.delay": 200,
    "editor.minimap.enabled": false,
    "window.commandCenter": false,
    "workbench.colorTheme": "Default Light Modern",
  };
  fs.writeFileSync(settingsFile, JSON.stringify(settings, null, 2));
  const common = ["--user-data-dir", dirs["user-data"], "--extensions-dir", dirs.extensions];

  log("installing the .vsix");
  const installed = run(CODE_SERVER, [...common, "--install-extension", VSIX], { env });
  check("vsix installs into code-server", /successfully installed/i.test(installed), installed.trim().split("\n").pop());

  const port = await freePort();
  const csLog = fs.openSync(path.join(ARTIFACTS, "code-server.log"), "w");
  codeServer = spawn(
    CODE_SERVER,
    [
      "--bind-addr", `127.0.0.1:${port}`,
      "--auth", "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--disable-getting-started-override",
      "--ignore-last-opened",
      ...common,
      dirs.repo,
    ],
    { env, detached: true, stdio: ["ignore", csLog, csLog] },
  );
  log(`code-server pid ${codeServer.pid} on port ${port}`);
  await waitFor(
    "code-server to answer /healthz",
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
      } catch {
        return false;
      }
    },
    60_000,
  );

  const { chromium } = await import("playwright-core");
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const openFolder = async (folder) => {
    const url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(folder)}`;
    log(`opening ${url}`);
    await page.goto(url);
    await page.waitForSelector(".monaco-workbench", { timeout: 60_000 });
    log("workbench loaded");
  };
  await openFolder(dirs.repo);

  const screenshot = async (name) => {
    try {
      await page.screenshot({ path: path.join(SHOTS, name) });
    } catch (e) {
      log(`screenshot failed: ${e}`);
    }
  };

  // F1 opens the command palette with ">"; replacing the whole input turns it into Quick Open (file
  // names, ":line:col"), so commands are typed with their ">" prefix.
  const palette = async (text, enter = true) => {
    await page.keyboard.press("Escape");
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor({ state: "visible", timeout: 10_000 });
    await input.fill(text);
    if (enter) {
      await sleep(400);
      await page.keyboard.press("Enter");
    }
    return input;
  };
  const runCommand = async (title) => {
    await palette(`>${title}`, false);
    await page.locator(".quick-input-widget .monaco-list-row", { hasText: title }).first().waitFor({ timeout: 15_000 });
    await page.keyboard.press("Enter");
  };
  const openFile = async (rel) => {
    await palette(rel, false);
    await page.locator(".quick-input-widget .monaco-list-row", { hasText: path.basename(rel) }).first().waitFor({ timeout: 15_000 });
    await page.keyboard.press("Enter");
    await page.locator(`.tab.active[aria-label*="${path.basename(rel)}"]`).waitFor({ timeout: 15_000 });
  };
  const gotoLine = async (line, col) => {
    await palette(`:${line}:${col}`); // Quick Open's go-to-line: 1-based line and column
    await sleep(300);
  };
  const gotoSymbol = async () => {
    const [line, col] = lineCol(CLIENT_V5, "fetch_with_retry(url", 2);
    await gotoLine(line, col);
    await page.locator(".monaco-editor .view-line", { hasText: "def fetch_with_retry" }).first().waitFor({ timeout: 10_000 });
    return line;
  };
  // picker answers after `before`, for a given server command
  const nextPicker = (before, command, via) =>
    waitFor(
      `a ${command} picker`,
      () =>
        events()
          .slice(before)
          .find((e) => ((e.event === "picker" && (!via || e.via === via)) || e.event === "empty" || e.event === "error") && (e.command === command || e.event === "error")),
      120_000,
    );
  const itemsOf = (p) => (p.items ?? []).filter((i) => i.kind === "item");
  const shaList = (p) => itemsOf(p).map((i) => i.sha);
  const hoverAt = async (line, col) => {
    await gotoLine(line, col);
    const before = events().length;
    await runCommand("Show or Focus Hover");
    const ev = await waitFor("a hover (self-test 'hover')", () => events().slice(before).find((e) => e.event === "hover"), 60_000);
    return (ev.contents ?? []).join("\n");
  };
  const noUnexpectedBrackets = async () =>
    page.evaluate(() => document.querySelectorAll(".editor-instance .monaco-editor .unexpected-closing-bracket").length);

  try {
    // --- the extension starts the server, which waits for the lock: "indexing" ---------------------------
    const started = await waitFor(
      "the extension to start the server (self-test 'started' or 'error')",
      () => events().find((e) => e.event === "started" || e.event === "error"),
      90_000,
    );
    if (!check("extension starts the language server", started.event === "started", started.message ?? started.command)) {
      throw new Error(`server did not start: ${started.message}`);
    }
    await waitFor("backstory/status state=indexing", () => events().find((e) => e.event === "status" && e.status?.state === "indexing"), 60_000);
    const barItems = page.locator(".statusbar-item", { hasText: "Backstory" });
    await barItems.filter({ hasText: "indexing history" }).first().waitFor({ timeout: 20_000 }).catch(() => undefined);
    const bar = (await barItems.allInnerTexts().catch(() => [])).map((t) => t.trim());
    check("status bar: one Backstory item, one line saying what it indexes", bar.length === 1 && /^Backstory: indexing history/.test(bar[0]), bar.join(" | "));
    const withUnits = events().some((e) => e.event === "status" && e.status?.state === "indexing" && /^indexing history \d[\d,]*\/\d[\d,]* commits$|^embedding \d[\d,]*\/\d[\d,]* files$/.test(e.status.message ?? ""));

    await openFile("app/client.py");
    await gotoSymbol();

    // --- partial results are labelled: the picker and the view ------------------------------------------
    {
      const before = events().length;
      await runCommand("Backstory: Find Prior Art");
      const p = await nextPicker(before, "backstory.findPriorArt").catch((e) => ({ error: e.message }));
      await page.locator(".quick-input-widget .monaco-list-row").first().waitFor({ timeout: 15_000 }).catch(() => undefined);
      await screenshot("vscode-partial.png");
      check(
        "partial results are labelled in the picker (title and placeholder), with advice that fits indexing",
        / \(partial\)$/.test(p.title ?? "") && /^Partial results: indexing/.test(p.placeholder ?? "") && !/backstory index/.test(p.placeholder ?? ""),
        `${p.title} — ${p.placeholder ?? p.error ?? p.message}`,
      );
      const tree = await waitFor("the view's answer", () => events().slice(before).find((e) => e.event === "tree"), 30_000).catch(() => ({}));
      check("partial results are labelled in the Backstory view", /^Partial results: indexing/.test(tree.message ?? ""), tree.message);
      const group = (p.items ?? []).find((i) => i.kind === "group");
      check("the partial exact history lacks the commit not indexed yet", group && !group.group.shas.includes(shas[LATE_COMMIT.subject]), JSON.stringify(group?.group?.shas));
      await page.keyboard.press("Escape");
    }

    // --- the lock is released; Reindex reports when it is done ----------------------------------------------
    {
      const before = events().length;
      lockHolder.kill("SIGKILL");
      await waitFor("the server to finish or give up", () => events().slice(before).find((e) => e.event === "status" && ["ready", "error"].includes(e.status?.state)), 120_000);
      const mark = events().length;
      await runCommand("Backstory: Reindex");
      const r = await waitFor("reindex (self-test 'reindex')", () => events().slice(mark).find((e) => e.event === "reindex" || e.event === "error"), 30_000).catch((e) => ({ error: e.message }));
      const done = await waitFor("the reindex to be reported done", () => events().slice(mark).find((e) => e.event === "reindexDone"), 180_000).catch((e) => ({ error: e.message }));
      const toast = await page.locator(".notification-toast", { hasText: "reindexing finished" }).first().innerText({ timeout: 10_000 }).catch(() => "");
      check("Reindex starts and its end is reported", r.result?.started === true && /reindexing finished/.test(done.message ?? "") && /reindexing finished/.test(toast), `${done.message ?? done.error} | toast: ${toast.replace(/\s+/g, " ").slice(0, 120)}`);
      check("after reindexing the index is up to date", /8 commits indexed, up to date/.test(done.message ?? ""), done.message);
      const said = events().filter((e) => e.event === "status" && e.status?.state === "indexing" && e.status?.total).map((e) => e.status.message);
      check("progress is said with units (indexing history N/M commits, embedding N/M files)", withUnits || said.some((m) => /^(indexing history \d[\d,]*\/\d[\d,]* commits|embedding \d[\d,]*\/\d[\d,]* files)$/.test(m ?? "")), said.slice(-3).join(" | "));
    }

    // --- prior art first; the exact history is one entry that opens a second list -------------------------
    let picker;
    {
      await gotoSymbol();
      const before = events().length;
      await runCommand("Backstory: Find Prior Art");
      picker = await nextPicker(before, "backstory.findPriorArt").catch((e) => ({ error: e.message }));
      await page.locator(".quick-input-widget .monaco-list-row").first().waitFor({ timeout: 15_000 }).catch(() => undefined);
      await screenshot("vscode-prior-art.png");
      const rows = (picker.items ?? []).filter((i) => i.kind !== "separator");
      log(`picker offered: ${rows.map((i) => `${i.kind} ${i.label} [${i.description}] {${i.detail}}`).join(" | ")}`);
      check("the prior-art answer is complete now (no partial label)", !/partial/.test(picker.title ?? "") && !picker.placeholder, `${picker.title} ${picker.placeholder ?? ""}`);
      const firstGroup = rows.findIndex((i) => i.kind === "group");
      check(
        "prior art first: related commits lead, the exact history is one entry after them",
        firstGroup > 0 && rows.slice(0, firstGroup).every((i) => i.kind === "item" && i.provenance === "INFERRED") && firstGroup === rows.length - 1,
        rows.map((i) => i.kind).join(","),
      );
      const group = rows[firstGroup];
      check(
        "the history entry names the symbol and counts its changes, and holds the exact history",
        group && /History of fetch_with_retry/.test(group.label) && group.description === "3 changes" && group.group.shas[0] === shas[LATE_COMMIT.subject] && group.group.shas.includes(expectedSha),
        group ? `${group.label} · ${group.description}` : "no group",
      );
      const related = rows.filter((i) => i.kind === "item");
      check(
        "rows say why in words, without lane jargon or backticks",
        related.length > 0 && related.every((i) => i.detail && !/#\d|rerank|learned|INFERRED|EXACT|`/.test(i.detail) && !/`/.test(i.label)),
        related.map((i) => i.detail).join(" | "),
      );
      check("picker item: description = sha · author · date", related.every((i) => /^[0-9a-f]{7} · .+ · \d+ \w+ ago$/.test(i.description)), related[0]?.description);
      // the history entry opens the exact history as a second list; pick the expected commit there
      const mark = events().length;
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "History of fetch_with_retry" }).first().click();
      const second = await nextPicker(mark, "backstory.findPriorArt", "group").catch((e) => ({ error: e.message }));
      check("the history entry opens the exact history, newest first", shaList(second)[0] === shas[LATE_COMMIT.subject] && shaList(second).includes(expectedSha), itemsOf(second).map((i) => i.label).join(" > "));
      check("exact history rows say why (same function)", itemsOf(second).every((i) => /^same function/.test(i.detail ?? "")), itemsOf(second)[0]?.detail);
      const row = page.locator(".quick-input-widget .monaco-list-row", { hasText: EXPECTED_SUBJECT }).first();
      await row.waitFor({ state: "visible", timeout: 15_000 });
      await row.click();
    }

    // --- the commit view -------------------------------------------------------------------------------------
    {
      const opened = await waitFor("the commit document (self-test 'open')", () => events().find((e) => e.event === "open"), 60_000);
      log(`opened ${opened.uri} at line ${opened.line}: ${JSON.stringify(opened.lineText)}`);
      check("the commit opens as a backstory: document", opened.uri.startsWith("backstory:"), opened.uri);
      check("the commit view uses the backstory-commit language (no bracket colouring)", opened.languageId === "backstory-commit", opened.languageId);
      check("the commit view is the expected commit", opened.sha === expectedSha && opened.text.includes(expectedSha.slice(0, 7)));
      check("it contains the added `delay *= 2`", /^\+\s+delay \*= 2\s*$/m.test(opened.text));
      check(
        "it is scrolled to the hunk, whose header names the definition it changed",
        opened.line > 0 && /^@@ .* @@ def fetch_with_retry\(url, attempts=5, delay=0\.5\):$/.test(opened.lineText),
        `line ${opened.line}: ${opened.lineText}`,
      );
      const tabText = (await page.locator(".tab.active").first().innerText().catch(() => "")).replace(/\s+/g, " ").trim();
      check("the tab title is the short sha and the whole subject", tabText.startsWith(`${expectedSha.slice(0, 7)} ${EXPECTED_SUBJECT}`), tabText);
      await screenshot("vscode-commit.png");
    }

    // --- hovers only where a user asks about a definition ------------------------------------------------------
    {
      await openFile("app/client.py");
      const cases = [
        ["a keyword (for)", lineCol(CLIENT_V5, "for attempt in", 1), false],
        ["a comment", lineCol(CLIENT_V5, "growing delay", 2), false],
        ["a parameter", lineCol(CLIENT_V5, "range(attempts)", 8), false],
        ["a string", lineCol(CLIENT_V5, '"retrying %s', 4), false],
        ["a call resolved in the same file (fetch)", lineCol(CLIENT_V5, "return fetch(url)", 9), "Past changes to `fetch`"],
        ["the definition's name", lineCol(CLIENT_V5, "fetch_with_retry(url", 3), "Past changes to `fetch_with_retry`"],
      ];
      for (const [what, [line, col], expected] of cases) {
        const text = await hoverAt(line, col);
        if (expected) check(`hover on ${what}`, text.includes(expected), text.split("\n")[0]);
        else check(`no hover on ${what}`, !/Past changes/.test(text), text.split("\n")[0] || "(none)");
      }
      // the last hover (the definition) is on screen: its actions are command links
      const hover = page.locator(".monaco-hover:not(.hidden)").first();
      const hoverText = await hover.innerText({ timeout: 10_000 }).catch(() => "");
      check(
        "the hover shows the changes with its actions: Open changes, Show all N changes, Find prior art",
        /Past changes to fetch_with_retry/.test(hoverText.replace(/`/g, "")) && /Open changes/.test(hoverText) && /Show all 3 changes/.test(hoverText) && /Find prior art/.test(hoverText),
        hoverText.replace(/\s+/g, " ").slice(0, 200),
      );
      const shaLinks = await hover.locator("a", { hasText: shas[LATE_COMMIT.subject].slice(0, 7) }).count();
      check("each sha in the hover is a link", shaLinks >= 1, `${shaLinks} link(s)`);
      await screenshot("vscode-hover.png");
      // "Open changes": VS Code's own side-by-side diff of the newest change, both sides from the server
      const before = events().length;
      await hover.locator("a", { hasText: "Open changes" }).first().click();
      const diff = await waitFor("the diff (self-test 'diff')", () => events().slice(before).find((e) => e.event === "diff" || e.event === "error"), 60_000).catch((e) => ({ error: e.message }));
      await page.locator(".monaco-diff-editor").first().waitFor({ timeout: 15_000 }).catch(() => undefined);
      const diffShown = await page.locator(".monaco-diff-editor").count();
      check(
        "the hover's Open changes opens a native side-by-side diff of the file before/after the commit",
        diff.isDiff === true && diffShown > 0 && diff.sha === shas[LATE_COMMIT.subject] && /except OSError:/.test(diff.before) && /except \(OSError, TimeoutError\):/.test(diff.after),
        `${diff.title ?? diff.error ?? diff.message} (tab ${diff.tabLabel})`,
      );
      check("the diff has a readable title", diff.title === `client.py (${shas[LATE_COMMIT.subject].slice(0, 7)}) ${LATE_COMMIT.subject}`, diff.title);
      await screenshot("vscode-diff.png");
    }

    // --- the Backstory view: prior art, history, commits expand to files, a file opens the diff -------------
    {
      await openFile("app/client.py");
      await gotoSymbol();
      const before = events().length;
      await runCommand("Backstory: Find Prior Art");
      await nextPicker(before, "backstory.findPriorArt");
      await page.keyboard.press("Escape");
      const tree = await waitFor("the view's answer", () => events().slice(before).find((e) => e.event === "tree"), 30_000).catch(() => ({}));
      const labels = (tree.groups ?? []).map((g) => `${g.label} (${g.description}, ${g.expanded ? "open" : "closed"})`);
      check(
        "the view shows Prior art (open) and History of fetch_with_retry (closed)",
        tree.groups?.[0]?.label === "Prior art" && tree.groups[0].expanded && tree.groups?.[1]?.label === "History of fetch_with_retry" && !tree.groups[1].expanded,
        labels.join(" | "),
      );
      await runCommand("Backstory: Show Results View");
      const view = page.locator(".pane-body .monaco-list").filter({ has: page.locator(".monaco-list-row", { hasText: "Prior art" }) }).first();
      await view.waitFor({ timeout: 15_000 });
      // expand the history group, then the expected commit, then open its file's diff
      const history = view.locator(".monaco-list-row", { hasText: "History of fetch_with_retry" }).first();
      await history.click();
      const commitRow = view.locator(".monaco-list-row", { hasText: EXPECTED_SUBJECT }).first();
      await commitRow.waitFor({ timeout: 15_000 });
      const mark = events().length;
      await commitRow.locator(".monaco-tl-twistie").click();
      const files = await waitFor("the commit's files", () => events().slice(mark).find((e) => e.event === "treeFiles"), 30_000).catch(() => ({}));
      check("a commit in the view expands to the files it changed", JSON.stringify(files.files) === JSON.stringify(["app/client.py"]), JSON.stringify(files.files));
      const fileRow = view.locator(".monaco-list-row", { hasText: "client.py" }).filter({ hasNotText: "History" }).last();
      await fileRow.waitFor({ timeout: 15_000 });
      const mark2 = events().length;
      await fileRow.click();
      const diff = await waitFor("the diff from the view", () => events().slice(mark2).find((e) => e.event === "diff" || e.event === "error"), 60_000).catch((e) => ({ error: e.message }));
      check(
        "a file in the view opens the native diff of that commit's change",
        diff.isDiff === true && diff.sha === expectedSha && !/fetch_with_retry/.test(diff.before) && /def fetch_with_retry/.test(diff.after),
        diff.title ?? diff.error,
      );
      await screenshot("vscode-view.png");
      // open the file as it was in that commit, from the file's inline action
      const mark3 = events().length;
      await fileRow.hover();
      await fileRow.locator('.action-label[aria-label="Open File at Revision"]').click({ timeout: 10_000 }).catch(() => undefined);
      const file = await waitFor("the file at the revision", () => events().slice(mark3).find((e) => e.event === "file" || e.event === "error"), 30_000).catch((e) => ({ error: e.message }));
      check("Open File at Revision opens the file as it was in that commit", file.sha === expectedSha && file.languageId === "python" && /^backstory-rev:/.test(file.uri ?? ""), `${file.uri ?? file.error} (${file.languageId})`);
    }

    // --- a commit whose diff shows an unmatched ")": no red bracket -------------------------------------------
    {
      const before = events().length;
      await palette(">Backstory: Search History", false);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "Backstory: Search History" }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      const input = page.locator(".quick-input-widget .quick-input-box input");
      await page.locator(".quick-input-widget", { hasText: "Describe the change" }).first().waitFor({ timeout: 10_000 });
      await input.fill("mark built requests as unverifiable");
      await page.keyboard.press("Enter");
      const p = await nextPicker(before, "backstory.search").catch((e) => ({ error: e.message }));
      const first = itemsOf(p)[0];
      check("Search History finds the commit first, saying why in words", first?.sha === shas["Mark built requests as unverifiable"] && /matches your words/.test(first.detail ?? ""), `${first?.label} — ${first?.detail}`);
      const row = page.locator(".quick-input-widget .monaco-list-row", { hasText: "Mark built requests as unverifiable" }).first();
      await row.click();
      const opened = await waitFor("the commit", () => events().slice(before).find((e) => e.event === "open"), 60_000);
      check("the diff shows a `)` whose `(` is outside the hunk", /^ {5}\)$/m.test(opened.text) && !/Request\(/.test(opened.text.split("@@").slice(-1)[0]), opened.lineText);
      await page.locator(".editor-instance .monaco-editor .view-line", { hasText: "unverifiable" }).first().waitFor({ timeout: 15_000 });
      const red = await noUnexpectedBrackets();
      check("no bracket is painted as unmatched in the commit view", red === 0, `${red} unexpected-closing-bracket element(s)`);
      await screenshot("vscode-commit-brackets.png");
      // the control: the same document in VS Code's `diff` language paints that `)` as unmatched
      await runCommand("Change Language Mode");
      const langInput = page.locator(".quick-input-widget .quick-input-box input");
      await langInput.fill("Diff");
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: /^Diff/ }).first().waitFor({ timeout: 10_000 }).catch(() => undefined);
      await page.keyboard.press("Enter");
      const asDiff = await waitFor("brackets painted as unmatched in the diff language", async () => (await noUnexpectedBrackets()) || false, 15_000).catch(() => 0);
      check("(control) in the diff language the same `)` is painted as unmatched", asDiff > 0, `${asDiff} element(s)`);
    }

    // --- a selection: prior art for the selected code on the first screen --------------------------------
    {
      await openFile("app/client.py");
      await gotoSymbol();
      const lineOf = (text) => page.locator(".editor-instance .monaco-editor .view-line", { hasText: text }).first();
      await lineOf("for attempt in range(attempts)").click();
      await lineOf("return fetch(url)").click({ modifiers: ["Shift"] });
      await page.locator(".statusbar-item", { hasText: "selected" }).first().waitFor({ timeout: 10_000 }).catch(() => undefined);
      const before = events().length;
      // F1 without the palette helper's Escape, which would cancel the selection
      await page.keyboard.press("F1");
      const input = page.locator(".quick-input-widget .quick-input-box input");
      await input.waitFor({ state: "visible", timeout: 10_000 });
      await input.fill(">Backstory: Find Prior Art");
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "Backstory: Find Prior Art" }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      const p = await nextPicker(before, "backstory.findPriorArt").catch((e) => ({ error: e.message }));
      const rows = (p.items ?? []).filter((i) => i.kind !== "separator");
      check(
        "a selection's first screen is prior art for the selection",
        p.title === "Backstory: prior art for the selection" && rows[0]?.kind === "item" && rows[0]?.provenance === "INFERRED",
        `${p.title}: ${rows.map((i) => i.label).join(" | ") || p.error || p.message}`,
      );
      await page.keyboard.press("Escape");
    }

    // --- code action from the server → client-side backstory.ui.findPriorArt -----------------------------
    await openFile("app/client.py");
    await gotoSymbol();
    {
      const before = events().length;
      await page.keyboard.press("Control+.");
      const action = page.locator(".action-widget .monaco-list-row", { hasText: "Find prior art for" }).first();
      const shown = await action.waitFor({ state: "visible", timeout: 20_000 }).then(() => true, () => false);
      const actionTitles = shown ? (await page.locator(".action-widget .monaco-list-row").allInnerTexts()).map((t) => t.trim()) : [];
      check("server code actions are offered", shown && actionTitles.some((t) => /Show history of/.test(t)), actionTitles.join(" | "));
      if (shown) {
        const focused = await page.locator(".action-widget .monaco-list-row.focused").first().innerText().catch(() => "");
        if (/Find prior art for/.test(focused)) await page.keyboard.press("Enter");
        else await action.click({ force: true });
        const p = await nextPicker(before, "backstory.findPriorArt").catch((e) => ({ error: e.message }));
        const group = (p.items ?? []).find((i) => i.kind === "group");
        check("code action runs backstory.ui.findPriorArt → picker", p.via === "codeAction" && group?.group?.shas.includes(expectedSha), `${p.event ?? p.error} via ${p.via}`);
      }
      await page.keyboard.press("Escape");
    }

    // --- Backstory: Show Symbol History ------------------------------------------------------------------
    {
      await gotoSymbol();
      const before = events().length;
      await runCommand("Backstory: Show Symbol History");
      const p = await nextPicker(before, "backstory.symbolHistory").catch((e) => ({ error: e.message }));
      const subjects = itemsOf(p).map((i) => i.label);
      check(
        "Show Symbol History lists the commits that changed fetch_with_retry, titled with its name",
        p.title === "Backstory: history of fetch_with_retry" && shaList(p).length === 3 && shaList(p).includes(expectedSha) && !shaList(p).includes(shas["Mark built requests as unverifiable"]),
        `${p.title}: ${subjects.join(" | ") || p.error || p.message}`,
      );
      await page.keyboard.press("Escape");
    }

    // --- status bar item → backstory.status ---------------------------------------------------------------
    {
      const before = events().length;
      const item = page.locator('.statusbar-item[id="backstory.backstory.status"], .statusbar-item:has-text("Backstory")').first();
      const label = await item.innerText({ timeout: 10_000 }).catch(() => "");
      await item.click({ timeout: 10_000 }).catch(() => undefined);
      const st = await waitFor("status command (self-test 'statusCommand')", () => events().slice(before).find((e) => e.event === "statusCommand" || e.event === "error"), 30_000).catch((e) => ({ error: e.message }));
      check("status bar shows Backstory and its click runs backstory.status", /Backstory/.test(label) && st.event === "statusCommand" && /8 commits indexed/.test(st.summary), `${label.trim()} → ${st.summary ?? st.message ?? st.error}`);
    }

    const toasts = (await page.locator(".notification-toast").allInnerTexts().catch(() => [])).join(" | ");
    check("the server accepted the client's options (no invalid-option message)", !/option .* is invalid/i.test(toasts), toasts.slice(0, 200));

    // --- a bad server path: one clear message with the fix; Open Settings lands on the setting --------------
    {
      const wsSettings = path.join(dirs.repo, ".vscode", "settings.json");
      fs.mkdirSync(path.dirname(wsSettings), { recursive: true });
      let before = events().length;
      await page.evaluate(() => document.querySelectorAll(".notification-toast .codicon-notifications-clear, .notification-toast .codicon-close").forEach((b) => b.click()));
      fs.writeFileSync(wsSettings, JSON.stringify({ "backstory.server.path": path.join(tmpRoot, "no-such-dir", "backstory") }));
      const err = await waitFor("the start error (self-test 'error')", () => events().slice(before).find((e) => e.event === "error" || e.event === "started"), 30_000).catch((e) => ({ error: e.message }));
      const toast = page.locator(".notification-toast", { hasText: "backstory.server.path" }).first();
      const toastText = (await toast.innerText({ timeout: 10_000 }).catch(() => "")).replace(/\s+/g, " ");
      const message = err.message ?? "";
      const sentences = message.split(/(?<=\.)\s+/);
      check(
        "a bad backstory.server.path gives one message naming the fix (install route and setting), once",
        err.event === "error" && /\.\/scripts\/setup/.test(message) && /pip install <path to the repository>/.test(message) && /set backstory\.server\.path/.test(message) && new Set(sentences).size === sentences.length && !/pip install backstory/.test(message) && /Open Settings/.test(toastText),
        message.slice(0, 300),
      );
      await toast.hover().catch(() => undefined);
      await toast.locator(".codicon-notifications-expand").first().click({ timeout: 3_000 }).catch(() => undefined);
      await sleep(800); // the toast's fade-in
      await screenshot("vscode-error.png");
      await toast.locator(".monaco-button", { hasText: "Open Settings" }).first().click();
      const setting = page.locator('.settings-editor .setting-item-contents[data-key="backstory.server.path"], .settings-editor .setting-item:has-text("Server: Path")').first();
      const landed = await setting.waitFor({ timeout: 20_000 }).then(() => true, () => false);
      const searchText = await page.locator(".settings-editor .suggest-input-container textarea, .settings-editor .settings-header .monaco-editor .view-line").first().innerText().catch(() => "");
      check("Open Settings lands on backstory.server.path in the settings editor", landed, `search: ${searchText.trim()}`);
      await screenshot("vscode-settings.png");
      before = events().length;
      fs.writeFileSync(wsSettings, JSON.stringify({ "backstory.server.path": BACKSTORY_EXE }));
      const again = await waitFor("the server to start again", () => events().slice(before).find((e) => e.event === "started" || e.event === "error"), 60_000).catch((e) => ({ error: e.message }));
      check("fixing the setting restarts the server", again.event === "started", again.message ?? again.error ?? again.command);
      fs.rmSync(path.join(dirs.repo, ".vscode"), { recursive: true, force: true });
    }

    // --- a workspace folder that is a subfolder of the repository -------------------------------------------
    {
      const before = events().length;
      await openFolder(path.join(dirs.repo, "app"));
      const startedOrError = () => events().slice(before).find((e) => e.event === "started" || e.event === "error");
      let started2 = await waitFor("the server in the subfolder window", startedOrError, 90_000).catch((e) => (log(String(e)), null));
      if (!started2) {
        // twice in ~40 runs the new window's extension host saw none of the user settings (its toast said the server
        // was not on PATH although backstory.server.path is set, and it wrote nothing to the results file they name);
        // the same window loaded again reads them. Said in the output, not hidden: code-server's, not ours to fix
        log("WARNING: the subfolder window reported nothing in 90 s (its extension had not read the user settings): loading it again");
        await openFolder(path.join(dirs.repo, "app"));
        started2 = await waitFor("the server in the subfolder window", startedOrError, 90_000);
      }
      check("the server starts for a subfolder workspace", started2.event === "started", started2.message ?? started2.command);
      await waitFor("ready in the subfolder window", () => events().slice(before).find((e) => e.event === "status" && e.status?.state === "ready"), 120_000);
      await openFile("client.py");
      await gotoSymbol();
      const mark = events().length;
      await runCommand("Backstory: Show Symbol History");
      const p = await nextPicker(mark, "backstory.symbolHistory").catch((e) => ({ error: e.message }));
      check("a subfolder workspace still gets the exact history", shaList(p).length === 3 && shaList(p).includes(expectedSha), itemsOf(p).map((i) => i.label).join(" | ") || p.error || p.message);
      await page.keyboard.press("Escape");
      const mark2 = events().length;
      await gotoSymbol();
      await runCommand("Backstory: Find Prior Art");
      const q = await nextPicker(mark2, "backstory.findPriorArt").catch((e) => ({ error: e.message }));
      const group = (q.items ?? []).find((i) => i.kind === "group");
      check("… and prior art with the exact history behind it", group?.group?.shas.length === 3, group ? `${group.label} · ${group.description}` : q.error ?? q.message);
      await page.keyboard.press("Escape");
    }

    // --- prior art for the uncommitted changes (last: it becomes the palette's most recent command) ------------
    {
      const title = "Backstory: Find Prior Art for These Changes";
      let before = events().length;
      await runCommand(title);
      // the picker event (no items) comes first, then the message
      const clean = await waitFor(
        "the changes command's message",
        () => events().slice(before).find((e) => (e.event === "empty" && e.command === "backstory.findPriorArtForChanges") || e.event === "error"),
        120_000,
      ).catch((e) => ({ error: e.message }));
      check("without uncommitted changes, the changes command says so (the server's hint)", clean.event === "empty" && /no uncommitted changes/.test(clean.message ?? ""), clean.message ?? clean.error ?? clean.title);
      const file = path.join(dirs.repo, "app", "client.py");
      fs.writeFileSync(file, CLIENT_V5 + CHANGE);
      try {
        before = events().length;
        await runCommand(title);
        const p = await nextPicker(before, "backstory.findPriorArtForChanges").catch((e) => ({ error: e.message }));
        await page.locator(".quick-input-widget .monaco-list-row").first().waitFor({ timeout: 15_000 }).catch(() => undefined);
        await screenshot("vscode-changes.png");
        check(
          "Find Prior Art for These Changes on an uncommitted edit lists prior art, the retry commit among it",
          p.event === "picker" && p.title === "Backstory: prior art for your changes (1 file)" && shaList(p).includes(expectedSha) && itemsOf(p).every((i) => i.provenance === "INFERRED"),
          `${p.title ?? p.event}: ${itemsOf(p).map((i) => i.label).join(" | ") || p.message || p.error}`,
        );
        await page.keyboard.press("Escape");
      } finally {
        fs.writeFileSync(file, CLIENT_V5);
      }
    }
  } catch (e) {
    await screenshot("failure.png");
    throw e;
  } finally {
    if (fs.existsSync(resultsFile)) fs.copyFileSync(resultsFile, path.join(ARTIFACTS, "selftest.jsonl"));
    // keep the extension's log channel for humans
    const logs = path.join(dirs["user-data"], "logs");
    if (fs.existsSync(logs)) {
      try {
        execFileSync("sh", ["-c", `find "${logs}" -name '*Backstory*.log' -exec cp {} "${ARTIFACTS}/" \\;`]);
      } catch {
        /* best effort */
      }
    }
  }
}

const timer = setTimeout(() => {
  console.error(`[e2e] overall timeout of ${TOTAL_TIMEOUT_S}s exceeded`);
  cleanupSync();
  process.exit(1);
}, TOTAL_TIMEOUT_S * 1000);

let failedHard = false;
try {
  await main();
} catch (e) {
  failedHard = true;
  console.error(`[e2e] ERROR: ${e instanceof Error ? e.message : e}`);
  check("end-to-end run completes", false, e instanceof Error ? e.message.split("\n")[0] : String(e));
} finally {
  clearTimeout(timer);
  try {
    await browser?.close();
  } catch {
    /* ignore */
  }
  killGroup("SIGTERM");
  await sleep(500);
  cleanupSync();
}
const failed = checks.filter((c) => !c.ok).length;
log(`artifacts in ${ARTIFACTS}`);
console.log(`e2e: ${checks.length - failed} passed, ${failed} failed`);
process.exit(failed || failedHard ? 1 : 0);
