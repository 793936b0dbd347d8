#!/usr/bin/env node
// End-to-end test of the Backstory extension in real VS Code (code-server 4.100.3 = VS Code 1.100.3),
// driven by Debian's Chromium through playwright-core.
//
//   1. builds and packages the .vsix (npm run package)
//   2. creates a temporary git repository with known commits, authors and dates
//   3. installs the .vsix into a temporary extensions dir and starts code-server (detached, own process group)
//   4. opens the workspace in headless Chromium, opens app/client.py, puts the cursor on `fetch_with_retry`,
//      runs "Backstory: Find Prior Art" from the command palette and picks the expected commit
//   5. asserts, from the extension's self-test JSON lines (backstory.test.resultsFile), that the commit was
//      offered and its diff opened as a `backstory:` document scrolled to the hunk; then triggers a hover and
//      asserts "Past changes to" was shown
//   6. saves a screenshot to clients/vscode/e2e-artifacts/ and kills code-server's whole process group
//
// Environment: BACKSTORY_EXE (default <repo>/.venv/bin/backstory), BACKSTORY_TOOLS (default <repo>/.tools),
// CHROMIUM (default /usr/bin/chromium), E2E_SKIP_PACKAGE=1 (reuse dist/backstory.vsix), E2E_KEEP=1 (keep temp dir),
// E2E_TIMEOUT (seconds, default 420).
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
const TOTAL_TIMEOUT_S = Number(process.env.E2E_TIMEOUT || 420);
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
function killGroup(signal) {
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
`;

const CLIENT_V2 = `"""A tiny HTTP client."""
import time
import urllib.request


def fetch(url):
    """Fetch a URL and return the body."""
    with urllib.request.urlopen(url) as response:
        return response.read()


def fetch_with_retry(url, attempts=5, delay=0.5):
    """Fetch a URL, retrying with exponential backoff on network errors."""
    for attempt in range(attempts):
        try:
            return fetch(url)
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay *= 2
`;

const CLIENT_V3 = CLIENT_V2.replace(`import time\n`, `import logging\nimport time\n`)
  .replace(`"""A tiny HTTP client."""\n`, `"""A tiny HTTP client."""\n`)
  .replace(
    `            time.sleep(delay)\n`,
    `            logging.getLogger(__name__).warning("retrying %s in %.1fs", url, delay)\n            time.sleep(delay)\n`,
  );

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
];

function makeRepo(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const git = (args, env = {}) =>
    run("git", args, {
      cwd: dir,
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", ...env },
    });
  git(["init", "-q", "-b", "main"]);
  git(["config", "user.name", "Backstory E2E"]);
  git(["config", "user.email", "e2e@example.com"]);
  git(["config", "commit.gpgsign", "false"]);
  for (const c of COMMITS) {
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
  const shas = git(["log", "--format=%H %s"]).trim().split("\n");
  return Object.fromEntries(shas.map((l) => [l.slice(41), l.slice(0, 40)]));
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

  const shas = makeRepo(dirs.repo);
  const expectedSha = shas[EXPECTED_SUBJECT];
  log(`test repository ${dirs.repo}: ${Object.keys(shas).length} commits; expected ${expectedSha.slice(0, 7)}`);

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
  };
  fs.writeFileSync(settingsFile, JSON.stringify(settings, null, 2));

  const env = {
    ...process.env,
    XDG_CONFIG_HOME: dirs["xdg-config"],
    XDG_DATA_HOME: dirs["xdg-data"],
    XDG_CACHE_HOME: dirs["xdg-cache"],
    XDG_STATE_HOME: dirs["xdg-state"],
    TMPDIR: dirs.tmp,
  };
  delete env.VSCODE_IPC_HOOK_CLI;
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
  const url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.repo)}`;
  log(`opening ${url}`);
  await page.goto(url);
  await page.waitForSelector(".monaco-workbench", { timeout: 60_000 });
  log("workbench loaded");

  const screenshot = async (name) => {
    try {
      await page.screenshot({ path: path.join(ARTIFACTS, name) });
    } catch (e) {
      log(`screenshot failed: ${e}`);
    }
  };

  try {
    // --- the extension activates and the server starts -----------------------------------------------
    const started = await waitFor(
      "the extension to start the server (self-test 'started' or 'error')",
      () => events().find((e) => e.event === "started" || e.event === "error"),
      90_000,
    );
    if (!check("extension starts the language server", started.event === "started", started.message ?? started.command)) {
      throw new Error(`server did not start: ${started.message}`);
    }
    const ready = await waitFor(
      "backstory/status state=ready",
      () => events().find((e) => e.event === "status" && e.status?.state === "ready"),
      180_000,
    ).catch((e) => ({ error: e.message }));
    const statuses = events().filter((e) => e.event === "status").map((e) => e.status?.state);
    check("server sends backstory/status until ready", !ready.error, `states: ${statuses.join(" → ") || "none"}`);

    // --- open app/client.py, cursor on fetch_with_retry -----------------------------------------------
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
    const openFile = async (rel) => {
      await palette(rel, false);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: path.basename(rel) }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      await page.locator(`.tab.active[aria-label*="${path.basename(rel)}"]`).waitFor({ timeout: 15_000 });
    };
    const gotoSymbol = async () => {
      const lines = CLIENT_V3.split("\n");
      const line = lines.findIndex((l) => l.startsWith("def fetch_with_retry")) + 1;
      await palette(`:${line}:8`); // Quick Open's go-to-line: line, column inside the name
      await sleep(300);
      await page.locator(".monaco-editor .view-line", { hasText: "def fetch_with_retry" }).first().waitFor({ timeout: 10_000 });
      return line;
    };

    await openFile("app/client.py");
    const symbolLine = await gotoSymbol();
    log(`cursor on fetch_with_retry (line ${symbolLine})`);

    // --- Backstory: Find Prior Art --------------------------------------------------------------------
    let picker;
    for (let attempt = 1; attempt <= 6 && !picker; attempt++) {
      const before = events().length;
      await palette(">Backstory: Find Prior Art", false);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "Backstory: Find Prior Art" }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      const answer = await waitFor(
        "the prior-art picker (self-test 'picker', 'empty' or 'error')",
        () => events().slice(before).find((e) => ["picker", "empty", "error"].includes(e.event)),
        120_000,
      );
      if (answer.event === "picker" && answer.items.some((i) => i.kind === "item")) {
        picker = answer;
      } else {
        const more = events().slice(before).find((e) => e.event === "empty" || e.event === "error");
        log(`attempt ${attempt}: no results yet (${more?.message ?? answer.event}); retrying in 10 s`);
        await page.keyboard.press("Escape");
        await sleep(10_000);
        await gotoSymbol();
      }
    }
    if (!picker) throw new Error("Find Prior Art never offered any commit");
    const offered = picker.items.filter((i) => i.kind === "item");
    log(`picker offered: ${offered.map((i) => `${i.provenance} ${i.label} [${i.description}] {${i.detail}}`).join(" | ")}`);
    const expectedItem = offered.find((i) => i.sha === expectedSha);
    check("Find Prior Art offers the expected commit", expectedItem, expectedItem ? `${expectedItem.label} — ${expectedItem.description}` : "not offered");
    check(
      "picker item: label = subject, description = sha · author · date",
      expectedItem &&
        expectedItem.label === EXPECTED_SUBJECT &&
        expectedItem.description.startsWith(`${expectedSha.slice(0, 7)} · Ada Lovelace · `),
      expectedItem?.description,
    );
    check("picker item: detail = file:lines · why", expectedItem && /^app\/client\.py:\d+(-\d+)? · (EXACT|INFERRED)/.test(expectedItem.detail), expectedItem?.detail);
    const decoys = ["Parse settings from an INI file", "Add CSV export for reports", "Format dates in ISO 8601"];
    const rank = (label) => offered.findIndex((i) => i.label === label);
    check(
      "the expected commit ranks above the decoys",
      decoys.every((d) => rank(d) === -1 || rank(d) > rank(EXPECTED_SUBJECT)),
      offered.map((i) => i.label).join(" > "),
    );

    // pick it in the real UI
    const row = page.locator(".quick-input-widget .monaco-list-row", { hasText: EXPECTED_SUBJECT }).first();
    await row.waitFor({ state: "visible", timeout: 15_000 });
    await row.click();
    const opened = await waitFor("the commit document (self-test 'open')", () => events().find((e) => e.event === "open"), 60_000);
    log(`opened ${opened.uri} at line ${opened.line}: ${JSON.stringify(opened.lineText)}`);
    check("diff opens as a backstory: document", opened.uri.startsWith("backstory:"), opened.uri);
    check("diff document has language diff", opened.languageId === "diff", opened.languageId);
    check("diff document is the expected commit", opened.sha === expectedSha && opened.text.includes(expectedSha.slice(0, 7)));
    check("diff document contains the added `delay *= 2`", /^\+\s+delay \*= 2\s*$/m.test(opened.text));
    check("editor is scrolled to a hunk header (hunks[].line)", opened.line > 0 && opened.lineText.startsWith("@@"), `line ${opened.line}: ${opened.lineText}`);
    const tabText = await page.locator(".tab.active").first().innerText().catch(() => "");
    check("the diff is the active editor tab", /\.diff/.test(tabText), tabText.replace(/\s+/g, " "));
    await screenshot("01-commit-diff.png");

    // --- hover ---------------------------------------------------------------------------------------
    await openFile("app/client.py");
    await gotoSymbol();
    let hoverEvent;
    let hoverText = "";
    for (let attempt = 1; attempt <= 3 && !/Past changes to/.test(hoverText); attempt++) {
      const before = events().length;
      await palette(">Show or Focus Hover", false);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "Show or Focus Hover" }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      hoverEvent = await waitFor("a hover (self-test 'hover')", () => events().slice(before).find((e) => e.event === "hover"), 60_000).catch(() => undefined);
      hoverText = await page
        .locator(".monaco-hover:not(.hidden)")
        .first()
        .innerText({ timeout: 10_000 })
        .catch(() => "");
      if (!/Past changes to/.test(hoverText)) await sleep(2000);
    }
    const hoverContents = (hoverEvent?.contents ?? []).join("\n");
    log(`hover: ${JSON.stringify(hoverContents.slice(0, 300))}`);
    check("hover from the server says “Past changes to”", /Past changes to/.test(hoverContents), hoverContents.split("\n")[0]);
    check("hover is visible in the editor", /Past changes to/.test(hoverText), hoverText.split("\n")[0]);
    await screenshot("e2e.png");

    // picker answers after `before`, for a given server command
    const nextPicker = (before, command) =>
      waitFor(`a ${command} picker`, () => events().slice(before).find((e) => (e.event === "picker" || e.event === "empty" || e.event === "error") && (e.command === command || e.event === "error")), 120_000);
    const shasOf = (p) => (p.items ?? []).filter((i) => i.kind === "item").map((i) => i.sha);

    // --- code action from the server → client-side backstory.ui.findPriorArt -----------------------------
    await page.keyboard.press("Escape");
    await gotoSymbol();
    {
      const before = events().length;
      await page.keyboard.press("Control+.");
      const action = page.locator(".action-widget .monaco-list-row", { hasText: "Find prior art for" }).first();
      const shown = await action.waitFor({ state: "visible", timeout: 20_000 }).then(() => true, () => false);
      const actionTitles = shown ? (await page.locator(".action-widget .monaco-list-row").allInnerTexts()).map((t) => t.trim()) : [];
      check("server code actions are offered", shown && actionTitles.some((t) => /Show history of/.test(t)), actionTitles.join(" | "));
      if (shown) {
        // the first action is focused; clicking rows of this widget is flaky in headless Chromium
        const focused = await page.locator(".action-widget .monaco-list-row.focused").first().innerText().catch(() => "");
        if (/Find prior art for/.test(focused)) await page.keyboard.press("Enter");
        else await action.click({ force: true });
        const p = await nextPicker(before, "backstory.findPriorArt").catch((e) => ({ error: e.message }));
        check("code action runs backstory.ui.findPriorArt → picker", p.via === "codeAction" && shasOf(p).includes(expectedSha), `${p.event ?? p.error} via ${p.via}`);
      }
      await page.keyboard.press("Escape");
    }

    // --- Backstory: Show Symbol History ------------------------------------------------------------------
    {
      await gotoSymbol();
      const before = events().length;
      await palette(">Backstory: Show Symbol History", false);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "Backstory: Show Symbol History" }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      const p = await nextPicker(before, "backstory.symbolHistory").catch((e) => ({ error: e.message }));
      const subjects = (p.items ?? []).filter((i) => i.kind === "item").map((i) => `${i.provenance} ${i.label}`);
      check(
        "Show Symbol History lists both commits that changed fetch_with_retry",
        shasOf(p).includes(expectedSha) && shasOf(p).includes(shas["Log each retry attempt"]) && !shasOf(p).includes(shas["Add CSV export for reports"]),
        subjects.join(" | ") || p.error || p.message,
      );
      await page.keyboard.press("Escape");
    }

    // --- Backstory: Search History… ----------------------------------------------------------------------
    {
      const before = events().length;
      await palette(">Backstory: Search History", false);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "Backstory: Search History" }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      const input = page.locator(".quick-input-widget .quick-input-box input");
      await page.locator(".quick-input-widget", { hasText: "Describe the change" }).first().waitFor({ timeout: 10_000 });
      await input.fill("retry a request with exponential backoff");
      await page.keyboard.press("Enter");
      const p = await nextPicker(before, "backstory.search").catch((e) => ({ error: e.message }));
      const labels = (p.items ?? []).filter((i) => i.kind === "item").map((i) => i.label);
      check("Search History finds the expected commit first", p.via === "input" && shasOf(p)[0] === expectedSha, labels.join(" > ") || p.error || p.message);
      await page.keyboard.press("Escape");
    }

    // --- status bar item → backstory.status ---------------------------------------------------------------
    {
      const before = events().length;
      const item = page.locator('.statusbar-item[id="backstory.backstory.status"], .statusbar-item:has-text("Backstory")').first();
      const label = await item.innerText({ timeout: 10_000 }).catch(() => "");
      await item.click({ timeout: 10_000 }).catch(() => undefined);
      const st = await waitFor("status command (self-test 'statusCommand')", () => events().slice(before).find((e) => e.event === "statusCommand" || e.event === "error"), 30_000).catch((e) => ({ error: e.message }));
      check("status bar shows Backstory and its click runs backstory.status", /Backstory/.test(label) && st.event === "statusCommand" && /6 commits indexed/.test(st.summary), `${label.trim()} → ${st.summary ?? st.message ?? st.error}`);
    }

    // --- Backstory: Reindex ---------------------------------------------------------------------------------
    {
      const before = events().length;
      await palette(">Backstory: Reindex", false);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: "Backstory: Reindex" }).first().waitFor({ timeout: 15_000 });
      await page.keyboard.press("Enter");
      const r = await waitFor("reindex (self-test 'reindex')", () => events().slice(before).find((e) => e.event === "reindex" || e.event === "error"), 30_000).catch((e) => ({ error: e.message }));
      const readyAgain = await waitFor("status ready after reindex", () => events().slice(before).find((e) => e.event === "status" && e.status?.state === "ready"), 120_000).catch(() => undefined);
      check("Reindex starts indexing and the status returns to ready", r.event === "reindex" && r.result?.started === true && readyAgain, r.message ?? r.error);
    }

    const toasts = (await page.locator(".notification-toast").allInnerTexts().catch(() => [])).join(" | ");
    check("the server accepted the client's options (no invalid-option message)", !/option .* is invalid/i.test(toasts), toasts.slice(0, 200));

    // --- a settings change restarts the server; a bad server path gives a clear error with a fix ---------
    {
      // workspace settings: the workspace folder is watched (changes to the user settings file written
      // behind code-server's back are not noticed)
      const wsSettings = path.join(dirs.repo, ".vscode", "settings.json");
      fs.mkdirSync(path.dirname(wsSettings), { recursive: true });
      let before = events().length;
      fs.writeFileSync(wsSettings, JSON.stringify({ "backstory.server.path": path.join(tmpRoot, "no-such-dir", "backstory") }));
      const err = await waitFor("the start error (self-test 'error')", () => events().slice(before).find((e) => e.event === "error" || e.event === "started"), 30_000).catch((e) => ({ error: e.message }));
      const toast = page.locator(".notification-toast", { hasText: "backstory.server.path" }).first();
      const toastText = await toast.innerText({ timeout: 10_000 }).catch(() => "");
      check(
        "bad backstory.server.path → error notification with a fix and an Open Settings button",
        err.event === "error" && /backstory\.server\.path/.test(err.message) && /Set backstory\.server\.path/.test(toastText) && /Open Settings/.test(toastText),
        (err.message ?? err.error ?? "").slice(0, 160),
      );
      await screenshot("02-start-error.png");
      before = events().length;
      fs.writeFileSync(wsSettings, JSON.stringify({ "backstory.server.path": BACKSTORY_EXE }));
      const again = await waitFor("the server to start again", () => events().slice(before).find((e) => e.event === "started" || e.event === "error"), 60_000).catch((e) => ({ error: e.message }));
      check("fixing the setting restarts the server", again.event === "started", again.message ?? again.error ?? again.command);
    }
  } catch (e) {
    await screenshot("failure.png");
    throw e;
  } finally {
    fs.copyFileSync(resultsFile, path.join(ARTIFACTS, "selftest.jsonl"));
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
