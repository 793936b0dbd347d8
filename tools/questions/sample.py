#!/usr/bin/env python3
"""Deterministic commit sampling for the natural-question development set.

Usage:
    python tools/questions/sample.py GITDIR --repo owner/name [-n 80]

Prints candidate commits, one JSON object per line, in sampling order:
    {"rank": 1, "sha": "...", "subject": "...", "changed": 42, "key": "..."}

The rule (see README.md):
  * candidates are the non-merge commits reachable from HEAD
    (``git rev-list --no-merges HEAD``);
  * the commit changes at least one file that is not documentation /
    changelog / lockfile / CI config: a path is *excluded* when it ends with
    .md .rst .txt .lock, is (or ends with /) package-lock.json or yarn.lock,
    or starts with .github/ or docs/ (top-level folders);
  * total changed lines (added + removed summed over all files in
    ``git show --numstat``; binary files, shown as "-", count 0) is between
    3 and 400 inclusive;
  * the subject does not match (case-insensitive)
    ``^(release|bump|version|prepare|merge|revert|v?\\d+\\.\\d+)``;
  * candidates are ordered by sha256("<owner>/<name>:" + full_sha) hex,
    ascending.

Skipping typo/formatting/lint-only commits is a human judgement made while
writing questions; this script does not try to detect them.

Only the standard library is used.
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys

SUBJECT_RE = re.compile(r"^(release|bump|version|prepare|merge|revert|v?\d+\.\d+)", re.I)
EXCLUDED_SUFFIXES = (".md", ".rst", ".txt", ".lock")
EXCLUDED_NAMES = ("package-lock.json", "yarn.lock")
EXCLUDED_PREFIXES = (".github/", "docs/")


def git(gitdir, *args):
    out = subprocess.run(
        ["git", "--git-dir", gitdir, *args],
        check=True,
        stdout=subprocess.PIPE,
    ).stdout
    return out.decode("utf-8", "replace")


def is_excluded_path(path):
    if path.endswith(EXCLUDED_SUFFIXES):
        return True
    name = path.rsplit("/", 1)[-1]
    if name in EXCLUDED_NAMES:
        return True
    return path.startswith(EXCLUDED_PREFIXES)


def parse_numstat_z(text):
    """Parse ``git show --numstat -z --format=`` output.

    Yields (added, removed, path) where path is the post-image path for
    renames/copies. Binary files (``-``) count as 0 lines.
    """
    fields = text.split("\0")
    i = 0
    while i < len(fields):
        field = fields[i].lstrip("\n")
        i += 1
        if not field:
            continue
        parts = field.split("\t", 2)
        if len(parts) != 3:
            continue
        added, removed, path = parts
        if path == "":
            # rename/copy: the next two NUL-separated fields are old and new path
            path = fields[i + 1] if i + 1 < len(fields) else ""
            i += 2
        a = int(added) if added.isdigit() else 0
        r = int(removed) if removed.isdigit() else 0
        yield a, r, path


def commit_info(gitdir, sha):
    subject = git(gitdir, "log", "-1", "--format=%s", sha).rstrip("\n")
    stat = git(gitdir, "show", "--numstat", "-z", "--format=", sha)
    total = 0
    has_code = False
    for a, r, path in parse_numstat_z(stat):
        total += a + r
        if not is_excluded_path(path):
            has_code = True
    return subject, total, has_code


def candidates(gitdir, repo, limit=None):
    shas = git(gitdir, "rev-list", "--no-merges", "HEAD").split()
    keyed = sorted((hashlib.sha256(f"{repo}:{sha}".encode()).hexdigest(), sha) for sha in shas)
    rank = 0
    for key, sha in keyed:
        subject, total, has_code = commit_info(gitdir, sha)
        if not has_code or not (3 <= total <= 400) or SUBJECT_RE.match(subject):
            continue
        rank += 1
        yield {"rank": rank, "sha": sha, "subject": subject, "changed": total, "key": key}
        if limit is not None and rank >= limit:
            return


def resolve_gitdir(path):
    """Accept either a bare git dir or a work tree."""
    try:
        out = subprocess.run(
            ["git", "-C", path, "rev-parse", "--absolute-git-dir"],
            check=True,
            stdout=subprocess.PIPE,
        ).stdout
        return out.decode().strip()
    except subprocess.CalledProcessError:
        return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gitdir", help="git directory (bare) or work tree")
    ap.add_argument("--repo", required=True, help="owner/name, used in the sort key")
    ap.add_argument("-n", type=int, default=80, help="how many candidates to print (0 = all)")
    args = ap.parse_args(argv)
    gitdir = resolve_gitdir(args.gitdir)
    for row in candidates(gitdir, args.repo, args.n or None):
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
