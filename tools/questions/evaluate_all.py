"""Run ``backstory.evaluation.evaluate --questions`` over every development set, with messages and message-blind.

    python tools/questions/evaluate_all.py --repos DIR --out DIR [--configs bm25-plain-msg,bm25,fused+rerank]

``--repos DIR`` holds one clone per history, named ``owner+name`` or ``name`` (checked out at the snapshot HEAD
the README lists). Indexes are kept under ``--out`` (reused when present: a second run only queries), and each
run's JSON report is written there; a table of MRR@10 / R@1 / R@10 per history and index kind is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def clone_for(repos: Path, repo: str) -> Path:
    owner, name = repo.split("/")
    for candidate in (repos / f"{owner}+{name}", repos / name):
        if (candidate / ".git").exists():
            return candidate
    raise SystemExit(f"no clone of {repo} under {repos} (expected {owner}+{name} or {name})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repos", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--configs", default="bm25-plain,bm25-plain-msg,bm25,fused,fused+rerank")
    ap.add_argument("--sets", nargs="*", type=Path, default=sorted((HERE / "sets").glob("*.jsonl")))
    ap.add_argument("--kinds", default="messages,blind", help="which index kinds: messages, blind or both")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table = []
    for qs in args.sets:
        repo = json.loads(qs.read_text("utf-8").splitlines()[0])["repo"]
        path = clone_for(args.repos, repo)
        for kind in args.kinds.split(","):
            tag = f"{repo.replace('/', '__')}-{kind}"
            out = args.out / f"{tag}.json"
            cmd = [
                sys.executable, "-m", "backstory.evaluation.evaluate", str(path), "--questions", str(qs),
                "--configs", args.configs, "--index-dir", str(args.out / f"index-{tag}"), "--out", str(out),
            ]  # fmt: skip
            if kind == "blind":
                cmd.append("--message-blind")
            subprocess.run(cmd, check=True)
            report = json.loads(out.read_text("utf-8"))
            for config in args.configs.split(","):
                m = report.get(config) or {}
                table.append((repo, kind, config, m.get("MRR@10"), m.get("R@1"), m.get("R@10")))
    print(f"{'history':24} {'index':9} {'config':16} MRR@10   R@1    R@10")
    for row in table:
        print(f"{row[0]:24} {row[1]:9} {row[2]:16} {row[3]!s:8} {row[4]!s:6} {row[5]!s:6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
