import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { commandLine, expandPath, isPythonInterpreter, resolveServer, which } from "../src/server";

let tmp: string;
let ws: string;
let bin: string;

function touchExe(p: string, mode = 0o755) {
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, "#!/bin/sh\n");
  fs.chmodSync(p, mode);
}

before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "backstory-server-test-"));
  ws = path.join(tmp, "ws");
  bin = path.join(tmp, "bin");
  fs.mkdirSync(ws, { recursive: true });
  fs.mkdirSync(bin, { recursive: true });
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("isPythonInterpreter / commandLine", () => {
  it("recognises python interpreters", () => {
    for (const p of ["/usr/bin/python", "python3", "/x/.venv/bin/python3.11", "C:\\Py\\python.exe", "pythonw.exe", "pypy3"]) {
      assert.ok(isPythonInterpreter(p), p);
    }
    for (const p of ["/x/.venv/bin/backstory", "python-config", "/usr/bin/pythonista", "ipython"]) {
      assert.ok(!isPythonInterpreter(p), p);
    }
  });
  it("runs `serve` directly or through `-m backstory`", () => {
    assert.deepEqual(commandLine("/v/bin/backstory", []), ["serve"]);
    assert.deepEqual(commandLine("/v/bin/python3", ["--log-level", "debug"]), ["-m", "backstory", "serve", "--log-level", "debug"]);
  });
});

describe("expandPath", () => {
  const env = () => ({ workspaceFolders: [ws], home: "/home/u" });
  it("expands ~, ${workspaceFolder} and ${userHome}, resolves relative paths against the folder", () => {
    assert.equal(expandPath("~/bin/backstory", env()), "/home/u/bin/backstory");
    assert.equal(expandPath("${workspaceFolder}/.venv/bin/backstory", env()), path.join(ws, ".venv/bin/backstory"));
    assert.equal(expandPath("${userHome}/x", env()), "/home/u/x");
    assert.equal(expandPath(".venv/bin/python", env()), path.join(ws, ".venv/bin/python"));
    assert.equal(expandPath("backstory", env()), "backstory");
  });
});

describe("resolveServer", () => {
  it("fails clearly when nothing is found", () => {
    const r = resolveServer({ path: "", args: [] }, { workspaceFolders: [ws], pathEnv: bin });
    assert.ok("error" in r);
    assert.equal(r.error, "the Backstory language server (backstory) is not in a workspace .venv or on PATH.");
    assert.match(r.fix, /\.\/scripts\/setup/);
    assert.match(r.fix, /pip install <path to the repository>/);
    assert.match(r.fix, /set backstory\.server\.path/);
    assert.doesNotMatch(r.error + r.fix, /pip install backstory/);
  });

  it("finds `backstory` on PATH", () => {
    touchExe(path.join(bin, "backstory"));
    const r = resolveServer({ path: "", args: ["--x"] }, { workspaceFolders: [ws], pathEnv: `/nonexistent:${bin}` });
    assert.deepEqual(r, { command: path.join(bin, "backstory"), args: ["serve", "--x"], cwd: ws, source: "path" });
  });

  it("prefers the workspace's .venv over PATH", () => {
    const venvExe = path.join(ws, ".venv", "bin", "backstory");
    touchExe(venvExe);
    const r = resolveServer({ path: "", args: [] }, { workspaceFolders: [ws], pathEnv: bin });
    assert.deepEqual(r, { command: venvExe, args: ["serve"], cwd: ws, source: "workspace-venv" });
  });

  it("ignores files that are not executable", () => {
    const other = path.join(tmp, "ws2");
    touchExe(path.join(other, ".venv", "bin", "backstory"), 0o644);
    const r = resolveServer({ path: "", args: [] }, { workspaceFolders: [other], pathEnv: bin });
    assert.ok(!("error" in r));
    assert.equal(r.source, "path");
  });

  it("uses the setting: an executable, relative to the workspace", () => {
    const r = resolveServer({ path: ".venv/bin/backstory", args: [] }, { workspaceFolders: [ws], pathEnv: "" });
    assert.deepEqual(r, { command: path.join(ws, ".venv/bin/backstory"), args: ["serve"], cwd: ws, source: "setting" });
  });

  it("uses the setting: a python interpreter runs `-m backstory serve`", () => {
    const py = path.join(tmp, "py", "bin", "python3.11");
    touchExe(py);
    const r = resolveServer({ path: py, args: ["--verbose"] }, { workspaceFolders: [ws], pathEnv: "" });
    assert.deepEqual(r, { command: py, args: ["-m", "backstory", "serve", "--verbose"], cwd: ws, source: "setting" });
  });

  it("uses the setting: a bare name is looked up on PATH", () => {
    touchExe(path.join(bin, "python3"));
    const r = resolveServer({ path: "python3", args: [] }, { workspaceFolders: [], pathEnv: bin });
    assert.deepEqual(r, { command: path.join(bin, "python3"), args: ["-m", "backstory", "serve"], cwd: undefined, source: "setting" });
  });

  it("reports a setting that points nowhere, without falling back", () => {
    const r = resolveServer({ path: "/no/such/backstory", args: [] }, { workspaceFolders: [ws], pathEnv: bin });
    assert.ok("error" in r);
    assert.match(r.error, /backstory\.server\.path is "\/no\/such\/backstory"/);
  });

  it("which() honours the isExecutable probe and Windows extensions", () => {
    const seen: string[] = [];
    const found = which("backstory", {
      workspaceFolders: [],
      pathEnv: "C:\\a;C:\\b",
      platform: "win32",
      isExecutable: (p) => {
        seen.push(p);
        return p.endsWith(path.join("C:\\b", "backstory.exe"));
      },
    });
    assert.equal(found, path.join("C:\\b", "backstory.exe"));
    assert.ok(seen.length >= 5);
  });
});
