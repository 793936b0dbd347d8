"""A stand-in Backstory language server that speaks docs/protocol.md, for client tests.

It answers from the git CLI of the workspace (no index, no ranking): every commit that touched the
file of the request is "exact" history, the others are "related". Each request it receives is
appended as a JSON line to $FAKE_BACKSTORY_LOG, so tests can assert what the client sent.
Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from urllib.parse import unquote, urlparse

COMMANDS = [
    "backstory.findPriorArt",
    "backstory.search",
    "backstory.symbolHistory",
    "backstory.showCommit",
    "backstory.reindex",
    "backstory.status",
]

root = os.getcwd()
documents: dict[str, str] = {}
log_path = os.environ.get("FAKE_BACKSTORY_LOG")


def log(entry: dict) -> None:
    if log_path:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def send(msg: dict) -> None:
    body = json.dumps(msg).encode("utf-8")
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def notify(method: str, params) -> None:
    send({"jsonrpc": "2.0", "method": method, "params": params})


def read() -> dict | None:
    headers = {}
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    return json.loads(sys.stdin.buffer.read(int(headers["content-length"])))


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def uri_path(uri: str) -> str:
    return unquote(urlparse(uri).path)


def rel(uri: str) -> str:
    return os.path.relpath(uri_path(uri), root)


def commits(path: str | None = None) -> list[dict]:
    fmt = "%H%x1f%h%x1f%s%x1f%an%x1f%ae%x1f%aI%x1f%cI%x1e"
    out = git("log", f"--format={fmt}", *(["--", path] if path else []))
    result = []
    for rec in out.split("\x1e"):
        rec = rec.strip()
        if not rec:
            continue
        sha, short, subject, name, email, date, cdate = rec.split("\x1f")
        result.append(
            {
                "sha": sha,
                "short_sha": short,
                "subject": subject,
                "body": "",
                "author": {"name": name, "email": email},
                "date": date,
                "commit_date": cdate,
            }
        )
    return result


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def hunks(sha: str) -> list[dict]:
    out = []
    path = None
    for line in git("show", "-U0", "--format=", sha).splitlines():
        if line.startswith("+++ "):
            path = None if line[4:] == "/dev/null" else line[6:]
        m = HUNK.match(line)
        if m and path:
            out.append(
                {
                    "path": path,
                    "old_path": path,
                    "change": "modify",
                    "old_start": int(m.group(1)),
                    "old_lines": int(m.group(2) or 1),
                    "new_start": int(m.group(3)),
                    "new_lines": int(m.group(4) or 1),
                    "language": "python",
                    "symbols": [],
                    "excerpt": line,
                    "truncated": False,
                    "lanes": {"diff": 1},
                }
            )
    return out


def entry(commit: dict, provenance: str, rank: int) -> dict:
    return {
        "provenance": provenance,
        "score": 1.0 / (60 + rank),
        "commit": commit,
        "why": {
            "lanes": {"diff": rank, "message": None, "path": None, "symbol": None, "dense": None},
            "fused": 1.0 / (60 + rank),
            "rerank": None,
            "recency": 1.0,
        },
        "hunks": hunks(commit["sha"]),
    }


def meta() -> dict:
    n = len(commits())
    return {
        "repo": root,
        "index": {
            "path": os.path.join(root, ".git", "backstory"),
            "head": git("rev-parse", "HEAD").strip(),
            "last_indexed_commit": git("rev-parse", "HEAD").strip(),
            "indexed_commits": n,
            "commits_behind_head": 0,
            "indexed_at": "2026-11-22T03:00:00+00:00",
            "dense_coverage": 1.0,
        },
        "lanes": ["diff", "message", "path", "symbol", "dense"],
        "rerank": None,
        "took_ms": 1.0,
        "hint": None,
        "warnings": [],
    }


def symbol_at(uri: str, line: int) -> dict | None:
    text = documents.get(uri)
    if text is None:
        with open(uri_path(uri), encoding="utf-8") as f:
            text = f.read()
    lines = text.splitlines()
    for i in range(min(line, len(lines) - 1), -1, -1):
        m = re.match(r"\s*(?:def|class|function|func|fn)\s+(\w+)", lines[i])
        if m:
            return {"name": m.group(1), "kind": "function", "path": rel(uri), "start": i + 1, "end": i + 1}
    return None


def history(arg: dict) -> dict:
    line = (arg.get("position") or arg.get("range", {}).get("start") or {}).get("line", 0)
    sym = symbol_at(arg["uri"], line)
    if sym is None:
        return {
            "symbol": None,
            "commits": [],
            "_meta": meta(),
            "message": f"no enclosing symbol at {rel(arg['uri'])}:{line + 1}",
        }
    mine = commits(rel(arg["uri"]))
    return {
        "symbol": sym,
        "commits": [entry(c, "EXACT", i + 1) for i, c in enumerate(mine)],
        "_meta": meta(),
        "message": None,
    }


def prior_art(arg: dict) -> dict:
    h = history(arg)
    exact_shas = {e["commit"]["sha"] for e in h["commits"]}
    others = [c for c in commits() if c["sha"] not in exact_shas]
    return {
        "query": h["symbol"]["name"] if h["symbol"] else "",
        "symbol": h["symbol"],
        "exact": h["commits"],
        "results": [entry(c, "INFERRED", i + 1) for i, c in enumerate(others)],
        "_meta": meta(),
    }


def search(arg: dict) -> dict:
    words = [w.lower() for w in arg["query"].split()]
    found = [c for c in commits() if any(w in c["subject"].lower() for w in words)]
    return {
        "query": arg["query"],
        "results": [entry(c, "INFERRED", i + 1) for i, c in enumerate(found)],
        "_meta": meta(),
    }


def show(arg: dict) -> dict:
    sha = git("rev-parse", arg["sha"]).strip()
    text = git("show", "--format=fuller", sha)
    out_hunks = []
    path = None
    for i, line in enumerate(text.splitlines()):
        if line.startswith("+++ "):
            path = None if line[4:] == "/dev/null" else line[6:]
        m = HUNK.match(line)
        if m and path:
            out_hunks.append({"path": path, "new_start": int(m.group(3)), "line": i})
    return {"sha": sha, "title": git("log", "-1", "--format=%h %s", sha).strip(), "text": text, "hunks": out_hunks}


def status_payload(state: str, done: int, total: int) -> dict:
    return {
        "state": state,
        "phase": "history",
        "done": done,
        "total": total,
        "indexed_commits": done,
        "commits_behind_head": total - done,
        "dense_coverage": 1.0 if state == "ready" else 0.0,
        "message": f"Indexing history {done}/{total} commits" if state == "indexing" else "Index ready",
        "repo": root,
    }


def announce() -> None:
    n = len(commits())
    notify("backstory/status", status_payload("starting", 0, n))
    notify("backstory/status", status_payload("indexing", 1, n))
    notify("backstory/status", status_payload("ready", n, n))


def hover(params: dict) -> dict | None:
    sym = symbol_at(params["textDocument"]["uri"], params["position"]["line"])
    if sym is None:
        return None
    lines = [f"**Past changes to `{sym['name']}`**", ""]
    for c in commits(rel(params["textDocument"]["uri"])):
        lines.append(f"- `{c['short_sha']}` {c['subject']} — {c['author']['name']}")
    return {"contents": {"kind": "markdown", "value": "\n".join(lines)}}


def code_actions(params: dict) -> list:
    uri = params["textDocument"]["uri"]
    rng = params["range"]
    sym = symbol_at(uri, rng["start"]["line"])
    actions = []
    if rng["start"] != rng["end"]:
        actions.append(
            {
                "title": "Find prior art for the selection",
                "kind": "",
                "command": {
                    "title": "Find prior art for the selection",
                    "command": "backstory.ui.findPriorArt",
                    "arguments": [{"uri": uri, "range": rng}],
                },
            }
        )
    if sym:
        pos = rng["start"]
        for title, cmd in (
            (f"Find prior art for `{sym['name']}`", "backstory.ui.findPriorArt"),
            (f"Show history of `{sym['name']}`", "backstory.ui.symbolHistory"),
        ):
            actions.append(
                {
                    "title": title,
                    "kind": "",
                    "command": {"title": title, "command": cmd, "arguments": [{"uri": uri, "position": pos}]},
                }
            )
    return actions


def execute(params: dict):
    cmd = params["command"]
    args = params.get("arguments") or [{}]
    arg = args[0] if args else {}
    if cmd == "backstory.findPriorArt":
        return prior_art(arg)
    if cmd == "backstory.symbolHistory":
        return history(arg)
    if cmd == "backstory.search":
        return search(arg)
    if cmd == "backstory.showCommit":
        return show(arg)
    if cmd == "backstory.reindex":
        announce()
        return {"started": True}
    if cmd == "backstory.status":
        return {"state": "ready", "repo": root, "index": meta()["index"], "hint": None}
    raise KeyError(cmd)


def main() -> None:
    global root
    while True:
        msg = read()
        if msg is None:
            return
        method = msg.get("method")
        params = msg.get("params") or {}
        log({"method": method, "params": params})
        result = None
        try:
            if method == "initialize":
                if params.get("rootUri"):
                    root = uri_path(params["rootUri"])
                result = {
                    "capabilities": {
                        "textDocumentSync": 1,
                        "hoverProvider": True,
                        "codeActionProvider": True,
                        "executeCommandProvider": {"commands": COMMANDS},
                    },
                    "serverInfo": {"name": "backstory-fake", "version": "0"},
                }
            elif method == "initialized":
                announce()
                continue
            elif method == "textDocument/didOpen":
                documents[params["textDocument"]["uri"]] = params["textDocument"]["text"]
                continue
            elif method == "textDocument/didChange":
                documents[params["textDocument"]["uri"]] = params["contentChanges"][-1]["text"]
                continue
            elif method == "textDocument/hover":
                result = hover(params)
            elif method == "textDocument/codeAction":
                result = code_actions(params)
            elif method == "workspace/executeCommand":
                result = execute(params)
            elif method == "shutdown":
                result = None
            elif method == "exit":
                return
            elif "id" not in msg:
                continue
        except Exception as e:  # report as a JSON-RPC error
            send({"jsonrpc": "2.0", "id": msg.get("id"), "error": {"code": -32603, "message": repr(e)}})
            continue
        if "id" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


if __name__ == "__main__":
    main()
