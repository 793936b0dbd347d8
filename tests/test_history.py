"""The history reader (libgit2 through pygit2) against real repositories built with the git CLI."""

from __future__ import annotations

import random
import subprocess

import pytest

from backstory.history.diff import diff_hunks
from backstory.history.libgit import walk
from backstory.history.policy import PathPolicy
from backstory.history.reader import read_commit, reading
from backstory.history.repo import EmptyRepository, HistoryError, head_sha, open_repo
from backstory.index import parallel
from backstory.symbols import definitions_touching, extract_definitions, supported_languages, versions
from gitrepo import GitRepo
from test_symbols import DATA, EXPECTED, mutate, tame


def _diffs(repo: GitRepo, policy: PathPolicy | None = None):
    r = open_repo(repo.path)
    return {c.subject: read_commit(r, c, policy or PathPolicy()) for c in walk(r, head_sha(r)) if not c.is_merge}


def test_hunk_ranges_match_git(repo: GitRepo) -> None:
    base = "".join(f"line {i}\n" for i in range(1, 41))
    repo.commit("base", {"f.txt": base})
    changed = base.replace("line 5\n", "line five\n").replace("line 30\n", "").replace("line 38\n", "line 38\nextra\n")
    repo.commit("edit", {"f.txt": changed})
    hunks = _diffs(repo)["edit"].files[0].hunks
    git_headers = [
        h.split(" @@")[0] + " @@" for h in repo.git("show", "--format=", "HEAD").splitlines() if h.startswith("@@")
    ]
    assert [h.excerpt.split("\n")[0] for h in hunks] == git_headers
    assert hunks[0].removed_lines == [5] and hunks[0].added_lines == [5]


def test_root_commit_adds_files_and_merges_are_not_diffed(repo: GitRepo) -> None:
    repo.commit("root", {"a.py": "x = 1\n"})
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side change", {"b.py": "y = 2\n"})
    repo.git("checkout", "-q", "main")
    repo.commit("main change", {"c.py": "z = 3\n"})
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    r = open_repo(repo.path)
    commits = list(walk(r, head_sha(r)))
    assert [c.subject for c in commits if c.is_merge] == ["merge side"]
    diffs = _diffs(repo)
    assert diffs["root"].files[0].change == "add"
    assert diffs["root"].files[0].hunks[0].added_lines == [1]
    assert set(diffs) == {"root", "side change", "main change"}


def test_rename_keeps_old_path(repo: GitRepo) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(20))
    repo.commit("add", {"old/name.py": body})
    (repo.path / "new").mkdir()
    repo.git("mv", "old/name.py", "new/name.py")
    repo.commit("move and edit", {"new/name.py": body.replace("return 3\n", "return 33\n")})
    f = _diffs(repo)["move and edit"].files[0]
    assert (f.change, f.old_path, f.path) == ("rename", "old/name.py", "new/name.py")
    assert len(f.hunks) == 1


def test_skips_are_counted(repo: GitRepo) -> None:
    repo.commit(
        "mixed",
        {
            ".gitattributes": "gen/** linguist-generated\nthird_party/* linguist-vendored=true\n",
            ".backstoryignore": "secret/\n",
            "gen/out.py": "x = 1\n",
            "third_party/lib.js": "var a;\n",
            "secret/keys.txt": "k\n",
            "img.png": b"\x89PNG\r\n\x1a\n\x00\x00binary",
            "big.txt": "x" * 2000 + "\n",
            "model.bin": "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n",
            "package-lock.json": "{}\n",
            "ok.py": "print('hi')\n",
        },
    )
    r = open_repo(repo.path)
    policy = PathPolicy(
        gitattributes=(repo.path / ".gitattributes").read_text(),
        backstoryignore=(repo.path / ".backstoryignore").read_text(),
        max_file_bytes=1000,
    )
    cd = read_commit(r, next(iter(walk(r, head_sha(r)))), policy)
    assert sorted(f.path for f in cd.files) == [".backstoryignore", ".gitattributes", "ok.py"]
    assert cd.skipped == {"binary": 1, "generated": 2, "ignored": 2, "lfs_pointer": 1, "too_large": 1}


def test_submodule_entries_are_skipped(repo: GitRepo, tmp_path) -> None:
    sub = GitRepo(tmp_path / "sub")
    sub.commit("sub", {"s.txt": "s\n"})
    repo.commit("root", {"a.txt": "a\n"})
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub.path), "vendor/sub")
    repo.commit("add submodule")
    cd = _diffs(repo)["add submodule"]
    assert [f.path for f in cd.files] == [".gitmodules"]
    assert cd.skipped == {"submodule": 1}
    # removing the submodule while adding files: its commit id must never be read as a rename candidate
    repo.git("rm", "-q", "vendor/sub")
    repo.commit("drop submodule", {"vendor/lib.py": "print('vendored by hand')\n"})
    dropped = _diffs(repo)["drop submodule"]
    assert dropped.skipped == {"submodule": 1}
    assert "vendor/lib.py" in [f.path for f in dropped.files]


def test_non_utf8_content_and_paths(repo: GitRepo) -> None:
    repo.commit("latin1", {"caf\xe9.txt": "ok\n"})
    (repo.path / "raw.txt").write_bytes(b"caf\xe9 na\xefve\n")
    name = b"bad\xffname.txt"
    with open(bytes(repo.path) + b"/" + name, "wb") as fh:
        fh.write(b"\xff\xfe text\n")
    repo.commit("bytes")
    cd = _diffs(repo)["bytes"]
    paths = sorted(f.path for f in cd.files)
    assert paths[0].startswith("bad") and "\ufffd" in paths[0]
    text = "\n".join(h.excerpt for f in cd.files for h in f.hunks)
    assert "caf\ufffd" in text


def test_diff_hunks_edge_cases() -> None:
    assert diff_hunks(b"", b"") == []
    (h,) = diff_hunks(b"", b"a\nb")
    assert (h.new_start, h.new_lines, h.added_lines) == (1, 2, [1, 2])
    (h,) = diff_hunks(b"a\nb\n", b"")
    assert (h.old_start, h.old_lines, h.new_start, h.new_lines) == (1, 2, 0, 0)
    assert diff_hunks(b"same\n", b"same\n") == []


def test_repository_errors(tmp_path) -> None:
    with pytest.raises(HistoryError, match="not a git repository"):
        open_repo(tmp_path)
    with pytest.raises(HistoryError, match="does not exist"):
        open_repo(tmp_path / "nope")
    empty = GitRepo(tmp_path / "empty")
    with pytest.raises(EmptyRepository, match="no commits yet"):
        head_sha(open_repo(empty.path))


def test_subdirectory_worktree_and_detached_head(repo: GitRepo, tmp_path) -> None:
    first = repo.commit("one", {"pkg/a.py": "a = 1\n"})
    repo.commit("two", {"pkg/a.py": "a = 2\n"})
    assert head_sha(open_repo(repo.path / "pkg")) == repo.head()
    repo.git("checkout", "-q", "--detach", first)
    assert head_sha(open_repo(repo.path)) == first
    repo.git("checkout", "-q", "main")
    repo.git("worktree", "add", "-q", str(tmp_path / "wt"), first)
    r = open_repo(tmp_path / "wt")
    assert head_sha(r) == first
    assert [c.subject for c in walk(r, head_sha(r))] == ["one"]


def test_shallow_clone_reads_what_exists(repo: GitRepo, tmp_path) -> None:
    for i in range(5):
        repo.commit(f"c{i}", {"f.txt": f"{i}\n"})
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", repo.path.as_uri(), str(clone)], check=True)
    r = open_repo(clone)
    commits = list(walk(r, head_sha(r)))
    assert [c.subject for c in commits] == ["c4", "c3"]
    assert commits[-1].parents == ()  # the shallow boundary reads as a root
    cd = read_commit(r, commits[-1], PathPolicy())
    assert cd.files[0].change == "add"


def test_missing_objects_are_skipped_not_fatal(repo: GitRepo) -> None:
    """A blob missing from the object store (broken or partial clone) is counted, never raised."""
    repo.commit("one", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    repo.commit("two", {"a.py": "x = 10\n", "b.py": None, "c.py": "z = 3\n"})
    blob = repo.git("rev-parse", "HEAD:a.py").strip()
    (repo.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    cd = _diffs(repo)["two"]
    assert cd.skipped.get("missing_object") == 1
    assert sorted(f.path for f in cd.files) == ["b.py", "c.py"]


def test_hunks_are_gits_own_diff(tmp_path) -> None:
    # line for line what `git diff` prints (without the indent heuristic, which git log -L does not use either),
    # on edits that patience and Myers align differently (repeated lines)
    import random

    rnd = random.Random(5)
    pool = ["    x = 1", "    return x", "    pass", "", "    if x:", "        return y", "}"]
    for case in range(12):
        old = [rnd.choice(pool) for _ in range(60)]
        new = list(old)
        for _ in range(6):
            i = rnd.randrange(len(new))
            op = rnd.random()
            if op < 0.4:
                new.insert(i, rnd.choice(pool))
            elif op < 0.7:
                del new[i]
            else:
                new[i] = rnd.choice(pool)
        a, b = tmp_path / f"a{case}", tmp_path / f"b{case}"
        a.write_text("\n".join(old) + "\n")
        b.write_text("\n".join(new) + "\n")
        out = subprocess.run(
            ["git", "-c", "diff.indentHeuristic=false", "diff", "--no-index", "-U3", str(a), str(b)],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        git_lines = [line.split(" @@")[0] + " @@" if line.startswith("@@") else line for line in out.splitlines()[4:]]
        ours = [line for h in diff_hunks(a.read_bytes(), b.read_bytes(), full=True) for line in h.excerpt.split("\n")]
        assert ours == git_lines, case


def test_hunks_keep_their_context_where_the_common_tail_is_cut(tmp_path) -> None:
    # the change blocks are diffed with git's 1 KiB common-tail cut (as git log -L diffs); a hunk ending at the
    # cut gets its trailing context back from the cut part, so hunks still read as `git diff -U3` prints them
    old = [f"line {i} of the file" for i in range(1, 301)]
    cases = 0
    for k in range(200, 300, 3):  # the cut lands somewhere in here: every distance from it is tried
        new = list(old)
        new[k] = f"changed line {k}"
        a, b = tmp_path / "a", tmp_path / "b"
        a.write_text("\n".join(old) + "\n")
        b.write_text("\n".join(new) + "\n")
        out = subprocess.run(
            ["git", "diff", "--no-index", "-U3", str(a), str(b)], capture_output=True, text=True, check=False
        ).stdout
        git_lines = [line.split(" @@")[0] + " @@" if line.startswith("@@") else line for line in out.splitlines()[4:]]
        (hunk,) = diff_hunks(a.read_bytes(), b.read_bytes(), full=True)
        assert hunk.excerpt.split("\n") == git_lines, k
        trailing = min(3, len(old) - 1 - k)
        assert hunk.ops == "3=1-1+" + (f"{trailing}=" if trailing else "")
        assert hunk.removed_lines == hunk.added_lines == [k + 1]
        cases += 1
    assert cases == 34


# -- symbol attribution: parse trees carried from version to version must not change anything --------------

LANGUAGE_FILES = {
    "python": "src/client.py",
    "javascript": "web/client.js",
    "go": "go/client.go",
    "rust": "rs/client.rs",
    "c": "c/client.c",
    "ruby": "rb/client.rb",
    "typescript": "web/types.ts",
}


def _evolve(repo: GitRepo, rng: random.Random, state: dict[str, list[bytes]], n: int, tag: str) -> None:
    """``n`` commits, each editing one to three files the way history does (mostly code that still parses)."""
    for i in range(n):
        files: dict[str, str | bytes | None] = {}
        for language in rng.sample(sorted(LANGUAGE_FILES), rng.randrange(1, 4)):
            lines = state[language]
            state[language] = mutate(lines, rng) if rng.random() < 0.2 else tame(lines, rng, language)
            files[LANGUAGE_FILES[language]] = b"".join(state[language])
        repo.commit(f"{tag} {i}", files)


def _reference(repo: GitRepo, sha: str, parent: str | None, fd) -> tuple[object, ...]:  # type: ignore[no-untyped-def]
    """What a fresh parse of both sides gives for one file diff (the reader's contract, stated plainly)."""

    def blob(rev: str | None, path: str) -> bytes:
        if rev is None:
            return b""
        out = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo.path, capture_output=True)
        return out.stdout if out.returncode == 0 else b""

    new = b"" if fd.change == "delete" else blob(sha, fd.path)
    old = b"" if fd.change == "add" else blob(parent, fd.old_path)
    new_defs = extract_definitions(new, fd.language) if new else []
    needs_old = old and any(h.removed_lines for h in fd.hunks)
    old_defs = extract_definitions(old, fd.language) if needs_old else []
    if new_defs is None or old_defs is None:
        return (False, [], [[] for _ in fd.hunks])
    hunks = []
    for h in fd.hunks:
        names: dict[tuple[str, str], tuple[str, str, int, int]] = {}
        for defs, lines in ((new_defs, h.added_lines), (old_defs, h.removed_lines)):
            for d in definitions_touching(defs, lines):
                names.setdefault((d.name, d.kind), (d.name, d.kind, d.start_line, d.end_line))
        hunks.append(list(names.values()))
    siblings = list(dict.fromkeys(d.name for d in new_defs or old_defs))[:60]
    return (True, siblings, hunks)


def _attribution(fd) -> tuple[object, ...]:  # type: ignore[no-untyped-def]
    return (fd.parsed, fd.sibling_symbols, [[(s.name, s.kind, s.start, s.end) for s in h.symbols] for h in fd.hunks])


def test_symbol_attribution_equals_fresh_parses_of_every_version(repo: GitRepo, monkeypatch) -> None:
    """Versions are parsed incrementally from their successors (a history with a merge) and their definitions
    carried over; in sequence and in the reader processes alike, the result must be what parsing every
    version from scratch gives."""
    rng = random.Random("attribution")
    state = {lang: (DATA / EXPECTED[lang][0]).read_bytes().splitlines(keepends=True) * 2 for lang in LANGUAGE_FILES}
    repo.commit("start", {path: b"".join(state[lang]) for lang, path in LANGUAGE_FILES.items()})
    _evolve(repo, rng, state, 8, "main")
    repo.git("checkout", "-q", "-b", "side")
    side_state = {k: list(v) for k, v in state.items()}
    _evolve(repo, rng, side_state, 6, "side")
    repo.git("checkout", "-q", "main")
    _evolve(repo, rng, state, 6, "main again")
    repo.git("merge", "-q", "--no-ff", "-X", "theirs", "-m", "merge side", "side", check=False)
    if repo.git("status", "--porcelain").strip():  # a conflict -X theirs could not settle: take side's files
        repo.git("checkout", "side", "--", ".")
        repo.git("commit", "-q", "-am", "merge side")
    for lang, path in LANGUAGE_FILES.items():
        state[lang] = (repo.path / path).read_bytes().splitlines(keepends=True)
    repo.git("mv", "src/client.py", "src/api.py")
    LANGUAGE_FILES_RENAMED = {**LANGUAGE_FILES, "python": "src/api.py"}
    repo.commit("rename", {})
    for i in range(6):
        lang = rng.choice(sorted(LANGUAGE_FILES))
        state[lang] = tame(state[lang], rng, lang)
        repo.commit(f"after {i}", {LANGUAGE_FILES_RENAMED[lang]: b"".join(state[lang])})
    repo.commit("drop go", {"go/client.go": None})

    r = open_repo(repo.path)
    todo = list(walk(r, head_sha(r)))
    assert sum(c.is_merge for c in todo) == 1
    reference = {}
    for c in todo:
        if c.is_merge:
            continue
        cd = read_commit(r, c, PathPolicy(), with_symbols=False)
        for fd in cd.files:
            if fd.language in supported_languages():
                reference[(c.sha, fd.path)] = _reference(repo, c.sha, c.parents[0] if c.parents else None, fd)
    assert len(reference) > 40
    monkeypatch.setattr(parallel, "MIN_PARALLEL", 0)
    monkeypatch.setattr(versions, "GAP", 0)  # in this process: carry over as many definitions as possible
    for n_workers in ("1", "2"):
        monkeypatch.setenv("BACKSTORY_WORKERS", n_workers)
        reading(r).versions.stats.clear()
        got = {
            (cd.commit.sha, fd.path): _attribution(fd)
            for cd in parallel.read_all(r, todo, PathPolicy(), True)
            for fd in cd.files
            if fd.language in supported_languages()
        }
        assert got == reference
        if n_workers == "1":  # the incremental paths ran (the workers' caches are in other processes)
            stats = reading(r).versions.stats
            assert stats["carried"] > 20 and stats["kept"] > stats["matched"], stats
            # the side branch's last versions (the merge's follow them) derived from the path's version read last
            assert stats["sibling"] > 0, stats


def test_read_commits_cross_the_pipe_whole(repo: GitRepo) -> None:
    """What a reader process sends the writer (a read commit with its symbols and its prepared texts) comes back
    equal from a pickle, every field of every object (`model.by_position`)."""
    import pickle

    from backstory.index.prepare import prepare

    repo.commit("start", {"app.py": "def run(x):\n    return x\n"})
    repo.commit(
        "rename and change", {"app.py": None, "main.py": "def run(x):\n    return x + 1\n\n\nclass C:\n    pass\n"}
    )
    r = open_repo(repo.path)
    for info in walk(r, head_sha(r)):
        cd = read_commit(r, info, PathPolicy())
        cd.prepared = prepare(cd, False)
        again = pickle.loads(pickle.dumps(cd))
        assert again == cd and again.commit == info and again.prepared == cd.prepared
    assert any(h.symbols for f in cd.files for h in f.hunks) and cd.files[0].sibling_symbols
