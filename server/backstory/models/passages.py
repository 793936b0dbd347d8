"""Text recipes: what the dense lane embeds and what the reranker reads for a commit.

One recipe string is stamped into the manifest, so vectors made from a different recipe are never mixed.
"""

from __future__ import annotations

from collections.abc import Sequence

RECIPE = "file-v1:path,symbols,subject?,changed-lines"
MAX_CHARS = 1600


def changed_lines(excerpt: str) -> list[str]:
    return [line[1:] for line in excerpt.split("\n")[1:] if line[:1] in "+-"]


def file_passage(path: str, symbols: Sequence[str], subject: str | None, excerpts: Sequence[str]) -> str:
    """Per-(commit, file) unit text: path, touched symbols, subject (unless message-blind), changed lines."""
    head = [path]
    if symbols:
        head.append(" ".join(dict.fromkeys(symbols)))
    if subject:
        head.append(subject)
    body: list[str] = []
    size = sum(len(h) for h in head)
    for ex in excerpts:
        for line in changed_lines(ex):
            stripped = line.strip()
            if not stripped:
                continue
            body.append(stripped)
            size += len(stripped) + 1
            if size >= MAX_CHARS:
                break
        if size >= MAX_CHARS:
            break
    return "\n".join(head + body)[:MAX_CHARS]
