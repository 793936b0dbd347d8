#!/usr/bin/env python3
"""Mechanical checks for natural-question set files.

Usage:
    python tools/questions/validate.py [SETFILE.jsonl ...] [--gitdir PATH]
                                       [--mirror-root DIR] [--no-git]

With no files, every ``sets/*.jsonl`` next to this script is checked.

Each line of a set file is one JSON object:
    {"repo": "owner/name", "sha": "<40 hex>", "question": "...",
     "identifiers": 0 | 1, "kind": "question" | "phrase"}

Checked without git:
  * JSON shape, field types and values; ``repo`` matches the file name
    (``owner__name.jsonl``);
  * ``sha`` is 40 lowercase hex;
  * the question has no run of 7+ hex characters containing a digit (a sha),
    no ``#123`` reference, no version-like ``\\d+\\.\\d+``;
  * at most one identifier-looking token (a backticked span, or a word
    containing ``_``, an inner ``.``, ``()``, or inner camelCase), and the
    declared ``identifiers`` equals the count found;
  * at least half of the file's questions have no identifier;
  * no duplicate questions (case/space-insensitive) and no duplicate shas.

Checked with git (the history's git dir is ``--gitdir`` or
``<mirror-root>/<owner>+<name>/repo``):
  * every sha is a candidate of the sampling rule (``sample.py``);
  * the set's shas plus the shas listed in ``<owner>__<name>.skipped.txt``
    are exactly the first K candidates in sampling order (nothing was
    silently passed over);
  * the question neither equals nor contains the commit subject (also with
    a trailing ``(#123)`` removed), nor the author's name.

Warnings (not violations): word count outside 4-16, a ``question`` not
ending in ``?`` or a ``phrase`` ending in ``?``.

Prints a summary per file; exits 1 if any violation was found.
Standard library only.
"""

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the folder free of __pycache__
sys.path.insert(0, HERE)
import sample  # noqa: E402

FIELDS = ("repo", "sha", "question", "identifiers", "kind")
KINDS = ("question", "phrase")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
HEX_RUN_RE = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{7,}(?![0-9A-Za-z])")
ISSUE_RE = re.compile(r"#\d+")
VERSION_RE = re.compile(r"\d+\.\d+")
BACKTICK_RE = re.compile(r"`[^`]+`")
CAMEL_RE = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]")
PLURAL_ACRONYM_RE = re.compile(r"^[A-Z]{2,}s$")
INNER_DOT_RE = re.compile(r"\w\.\w")
# Proper nouns that look like camelCase or dotted names but are not code.
ALLOW = {
    "macos",
    "ios",
    "github",
    "gitlab",
    "pypi",
    "pypy",
    "javascript",
    "typescript",
    "commonjs",
    "numpy",
    "ipython",
    "node.js",
    "e.g.",
    "i.e.",
    "vs",
    "rspec",
    "youtube",
    "postgresql",
    "mysql",
    "sqlite",
    "graphql",
    "webassembly",
}
TRAILING_ISSUE_RE = re.compile(r"\s*\((?:fixes |closes )?#\d+\)\s*$", re.I)


def norm(text):
    return " ".join(text.lower().split())


def identifier_tokens(question):
    """Return the identifier-looking tokens of a question."""
    found = [m.group(0) for m in BACKTICK_RE.finditer(question)]
    rest = BACKTICK_RE.sub(" ", question)
    for raw in rest.split():
        if "()" in raw:
            found.append(raw)
            continue
        token = raw.strip("?!,;:\"'()[]{}")
        if token.endswith("'s"):
            token = token[:-2]
        token = token.rstrip(".")
        if not token or token.lower() in ALLOW:
            continue
        if (
            "_" in token
            or INNER_DOT_RE.search(token)
            or (CAMEL_RE.search(token) and not PLURAL_ACRONYM_RE.match(token))
        ):
            found.append(token)
    return found


def git(gitdir, *args):
    return subprocess.run(
        ["git", "--git-dir", gitdir, *args],
        check=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ).stdout.decode("utf-8", "replace")


def read_skipped(path):
    skipped = {}
    if not os.path.exists(path):
        return skipped
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            sha, _, reason = line.partition("\t")
            if not reason:
                sha, _, reason = line.partition(" ")
            skipped[sha.strip()] = reason.strip()
    return skipped


def check_file(path, gitdir_override, mirror_root, use_git):
    violations = []
    warnings = []
    base = os.path.basename(path)
    stem = base[: -len(".jsonl")] if base.endswith(".jsonl") else base
    expected_repo = stem.replace("__", "/", 1)
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                violations.append(f"line {lineno}: invalid JSON ({exc})")
                continue
            if not isinstance(obj, dict):
                violations.append(f"line {lineno}: not a JSON object")
                continue
            missing = [f for f in FIELDS if f not in obj]
            extra = [f for f in obj if f not in FIELDS]
            if missing:
                violations.append(f"line {lineno}: missing fields {missing}")
                continue
            if extra:
                violations.append(f"line {lineno}: unknown fields {extra}")
            rows.append((lineno, obj))

    seen_q, seen_sha = {}, {}
    zero = 0
    for lineno, obj in rows:
        where = f"line {lineno}"
        repo, sha, q = obj["repo"], obj["sha"], obj["question"]
        ident, kind = obj["identifiers"], obj["kind"]
        if repo != expected_repo:
            violations.append(f"{where}: repo {repo!r} does not match file name ({expected_repo!r})")
        if not isinstance(sha, str) or not SHA_RE.match(sha):
            violations.append(f"{where}: sha is not 40 lowercase hex: {sha!r}")
        if not isinstance(q, str) or not q.strip():
            violations.append(f"{where}: empty or non-string question")
            continue
        if kind not in KINDS:
            violations.append(f"{where}: kind must be one of {KINDS}, got {kind!r}")
        if ident not in (0, 1) or isinstance(ident, bool):
            violations.append(f"{where}: identifiers must be 0 or 1, got {ident!r}")
        for m in HEX_RUN_RE.finditer(q):
            if any(c.isdigit() for c in m.group(0)):
                violations.append(f"{where}: hex run looks like a sha: {m.group(0)!r}")
        if ISSUE_RE.search(q):
            violations.append(f"{where}: issue/PR reference: {ISSUE_RE.search(q).group(0)!r}")
        if VERSION_RE.search(q):
            violations.append(f"{where}: version-like number: {VERSION_RE.search(q).group(0)!r}")
        toks = identifier_tokens(q)
        if len(toks) > 1:
            violations.append(f"{where}: more than one identifier: {toks}")
        if ident in (0, 1) and len(toks) != ident:
            violations.append(f"{where}: declares identifiers={ident} but found {len(toks)}: {toks}")
        if not toks:
            zero += 1
        key = norm(q)
        if key in seen_q:
            violations.append(f"{where}: duplicate question (also line {seen_q[key]})")
        seen_q[key] = lineno
        if sha in seen_sha:
            violations.append(f"{where}: duplicate sha (also line {seen_sha[sha]})")
        seen_sha[sha] = lineno
        words = len(q.split())
        if not 4 <= words <= 16:
            warnings.append(f"{where}: {words} words (typical is 4-16)")
        if kind == "question" and not q.rstrip().endswith("?"):
            warnings.append(f"{where}: kind=question but no '?'")
        if kind == "phrase" and q.rstrip().endswith("?"):
            warnings.append(f"{where}: kind=phrase but ends with '?'")

    n = len(rows)
    if n and zero * 2 < n:
        violations.append(f"only {zero}/{n} questions have no identifier (need at least half)")

    git_note = "git checks skipped"
    skipped_path = os.path.join(os.path.dirname(path), stem + ".skipped.txt")
    skipped = read_skipped(skipped_path)
    for sha in skipped:
        if not SHA_RE.match(sha):
            violations.append(f"{os.path.basename(skipped_path)}: bad sha {sha!r}")
        if sha in seen_sha:
            violations.append(f"{os.path.basename(skipped_path)}: {sha} is both skipped and used")

    gitdir = gitdir_override or os.path.join(mirror_root, expected_repo.replace("/", "+"), "repo")
    if use_git and rows and os.path.isdir(gitdir):
        gitdir = sample.resolve_gitdir(gitdir)
        wanted = set(seen_sha) | set(skipped)
        order = []
        for cand in sample.candidates(gitdir, expected_repo):
            order.append(cand["sha"])
            if wanted.issubset(order):
                break
        pos = {sha: i for i, sha in enumerate(order)}
        not_cands = sorted(wanted - set(pos))
        for sha in not_cands:
            violations.append(f"sha {sha} is not a sampling candidate of {expected_repo}")
        if not not_cands:
            k = max(pos[s] for s in wanted) + 1
            gaps = [f"rank {i + 1} {order[i]}" for i in range(k) if order[i] not in wanted]
            for gap in gaps:
                violations.append(f"{gap} was passed over (neither used nor listed as skipped)")
        for lineno, obj in rows:
            sha = obj["sha"]
            if not SHA_RE.match(sha) or sha not in pos:
                continue
            subject, author = git(gitdir, "log", "-1", "--format=%s%x00%an", sha).rstrip("\n").split("\0")
            qn = norm(obj["question"])
            for subj in {norm(subject), norm(TRAILING_ISSUE_RE.sub("", subject))}:
                if subj and (qn == subj or subj in qn):
                    violations.append(f"line {lineno}: question contains the commit subject {subject!r}")
                    break
            if author.strip() and norm(author) in qn:
                violations.append(f"line {lineno}: question contains the author name {author!r}")
        git_note = f"git checks against {gitdir}"
    elif use_git and rows:
        git_note = f"git checks skipped (no git dir at {gitdir})"

    print(f"{path}: {n} questions, {zero} without identifier, {n - zero} with one, {len(skipped)} skipped; {git_note}")
    kinds = {k: sum(1 for _, o in rows if o.get("kind") == k) for k in KINDS}
    print(f"  kinds: {kinds}")
    for w in warnings:
        print(f"  warning: {w}")
    for v in violations:
        print(f"  VIOLATION: {v}")
    return not violations


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--gitdir", help="git dir of the history (only with a single file)")
    ap.add_argument(
        "--mirror-root",
        default="/work/.mirror",
        help="where <owner>+<name>/repo git dirs live [default: /work/.mirror]",
    )
    ap.add_argument("--no-git", action="store_true", help="skip the checks that need git")
    args = ap.parse_args(argv)
    files = args.files
    if not files:
        setdir = os.path.join(HERE, "sets")
        files = (
            sorted(os.path.join(setdir, f) for f in os.listdir(setdir) if f.endswith(".jsonl"))
            if os.path.isdir(setdir)
            else []
        )
    if args.gitdir and len(files) != 1:
        ap.error("--gitdir needs exactly one set file")
    ok = True
    for path in files:
        ok &= check_file(path, args.gitdir, args.mirror_root, not args.no_git)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
