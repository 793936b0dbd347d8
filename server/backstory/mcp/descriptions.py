"""What an agent reads before it calls a tool: when to use each one, when not, and what comes back."""

from __future__ import annotations

INSTRUCTIONS = """\
Backstory answers "how did we do this before?" from this repository's own git history. It indexes every \
commit's diff in the background and keeps up with new commits by itself.
- find_prior_art: before writing or changing code, find past commits that did something similar (query), or \
the history of and prior art for the definition at a position (path + line).
- symbol_history: every commit that changed one function/class, exactly (like git log -L).
- show_commit: read one commit's message and diff in full.
- index_status: how complete and fresh the index is (results also carry this, with a hint when partial).
Provenance: EXACT = the commit changed that definition (certain); INFERRED = a ranked match (verify it)."""

FIND_PRIOR_ART = """\
Search this repository's git history for commits that already did something like what you are about to do: \
a similar feature, fix, refactoring, migration or pattern ("how did we do this before?"). Ranks every commit's \
diff by meaning and keywords (not only commit messages) and says why each matched.

Use it: before implementing something that may exist in spirit elsewhere; when a bug looks familiar; to find \
the commit that introduced a behaviour, an API or a config option; to learn a repository's conventions from \
its own past changes.
Give either `query` (words or code: "retry an HTTP request with exponential backoff", an error message, a \
signature) or `path` + `line` (prior art for the definition there: its EXACT history, newest first, in \
`exact`, and related commits elsewhere in `results`). With both, `query` is searched and the definition's \
history is listed beside it.
Filters: since/until (YYYY-MM-DD, or 30d, 2w, 6m, 1y), path_glob, author, language.

Not for: the current content of files (read them); every commit that touched one definition (use \
symbol_history); a commit's full diff (use show_commit with a sha from the results).
Returns the JSON of `backstory query --json`: results[] with provenance (INFERRED), score, commit (sha, \
subject, author, date), why (lanes and scores), hunks (path, lines, symbols, diff excerpt); _meta with index \
freshness, indexing progress and a hint when the index is partial."""

SYMBOL_HISTORY = """\
The EXACT history of the function, method or class enclosing `path`:`line`: every commit that changed its \
lines, newest first, computed like `git log -L` (line ranges carried back through every diff, renames \
followed; no ranking, no guessing; provenance EXACT).

Use it: to learn why a definition is the way it is, who changed it and when, what a past fix to it looked \
like, or before changing it. `line` is 1-based, as the file is on disk now.
Not for: similar code elsewhere (use find_prior_art); a whole file's log. A line outside any definition (or \
in a language without a symbol parser) is not an error: `symbol` is null and `message` says why.
Returns the JSON of `backstory history --json`: symbol (name, kind, path, start, end), commits[] (provenance \
EXACT, commit, the hunks that touched it), _meta (freshness; a warning when `limit` cut older commits)."""

SHOW_COMMIT = """\
One commit's header, message and unified diff, as text, like `git show`: pass a sha from find_prior_art or \
symbol_history (7 characters are enough), a branch, a tag, or HEAD~2.

Use it: after a search, to read a promising change in full before reusing its approach.
`path` shows only that file's diff (for a merge commit: that file against each parent; a merge without path \
shows only its message). Long diffs are cut after `max_lines` lines with a note saying how many lines were \
cut and which files' hunks were in the cut part: call again with `path` for one of them.
Not for: searching (use find_prior_art); files as they are now (read them).
Structured content: sha, title, text, hunks[] (path, new_start, old_start, line = where the hunk starts in \
text), files, lines, shown_lines, truncated, note."""

INDEX_STATUS = """\
How complete and fresh the history index is, and what the background indexer is doing: indexed commits, \
commits behind HEAD, embedding coverage, files still to embed, size, and server.state = indexing (with \
phase and progress), waiting (another indexer holds the write lock; retried automatically), ready or error.

Use it: when results look thin or an answer's hint says the index is partial, or to follow a first index.
Not for: a routine check before every search (each answer carries its freshness in _meta.index and a hint \
when the index is partial); starting indexing (the server indexes new commits by itself, within seconds)."""

DESCRIPTIONS = {
    "find_prior_art": FIND_PRIOR_ART,
    "symbol_history": SYMBOL_HISTORY,
    "show_commit": SHOW_COMMIT,
    "index_status": INDEX_STATUS,
}

ARGS = {
    "query": "What you look for, in words or code: a behaviour ('retry an HTTP request with exponential backoff'), "
    "an error message, a signature. Optional with path + line.",
    "path": "A file, relative to the repository root: prior art for the definition at path:line (give line too).",
    "line": "1-based line in path, as the file is on disk.",
    "k": "How many related commits (1-20).",
    "since": "Only commits authored on or after: YYYY-MM-DD, RFC 3339, or an age like 30d, 2w, 6m, 1y.",
    "until": "Only commits authored on or before (same forms as since).",
    "path_glob": "Only hunks in matching paths: 'src/**/*.py', '*.go', or a directory 'src/net'.",
    "author": "Only commits whose author name or email contains this.",
    "language": "Only hunks in this language: python, javascript, typescript, tsx, rust, go, java, c, cpp, ruby, …",
    "history_path": "A file, relative to the repository root.",
    "history_line": "1-based line inside the definition, as the file is on disk.",
    "limit": "At most this many commits, newest first (1-200).",
    "revision": "A commit: sha (4+ hex digits, e.g. from find_prior_art), branch, tag or HEAD, with ~N / ^N steps.",
    "show_path": "Only this file's diff (relative to the repository root); for a merge, against each parent.",
    "max_lines": "Cut the text after this many lines (20-5000); a note says how much was cut.",
}
