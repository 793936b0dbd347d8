"""Embedding throughput benchmark: ``python -m backstory.evaluation.models_bench``.

Measures texts/s on synthetic diff-like texts (~200 tokens, varied lengths, as hunks are) for the shipped
and the optimized model, with and without length sorting, plus peak RSS. Each configuration runs in its own
process so that its peak RSS is its own and one configuration's allocator state cannot flatter the next.
The optimized model is built into the cache first (timed when it had to be built), so runs measure
embedding only. Numbers guide defaults (batch size, threads, ``optimize``); they are not a regression gate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from ..models.embedder import DEFAULT_WINDOW, Embedder
from ..models.files import default_cache_dir, resolve_model

_WORDS = (
    "request session client retry backoff timeout config parser token index commit history author message "
    "path symbol cache store vector score rank query result error status handler buffer stream reader writer "
    "offset length window batch worker queue lock event callback future schema record field value"
)
_IDENTS = _WORDS.split()
_STATEMENTS = (
    "{a} = {b}.{c}({d})",
    "if {a} is None:",
    "return {a}.{b}({c}, {d})",
    "for {a} in {b}.{c}():",
    'raise {A}Error(f"cannot {b} {{{c}}}")',
    "self.{a}[{b}] = {c}",
    "with self.{a}:",
    "{a} += len({b})",
    'log.debug("{a} %s %d", {b}, {c})',
    "except {A}Error as {b}:",
)


def synthetic_texts(count: int, tokenizer: Tokenizer, seed: int = 1234) -> list[str]:
    """Diff-like hunks whose token counts spread over ~100-300 (mean ~200 before truncation)."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(count):
        target = rng.randint(100, 300)
        module, name = rng.choice(_IDENTS), rng.choice(_IDENTS)
        line = rng.randint(1, 900)
        lines = [
            f"diff --git a/src/{module}/{name}.py b/src/{module}/{name}.py",
            f"@@ -{line},7 +{line},9 @@ def {rng.choice(_IDENTS)}_{rng.choice(_IDENTS)}(self, {rng.choice(_IDENTS)}):",
        ]
        while len(tokenizer.encode("\n".join(lines)).ids) < target:
            words = {k: rng.choice(_IDENTS) for k in "abcd"}
            statement = rng.choice(_STATEMENTS).format(A=words["a"].title(), **words)
            lines.append(f"{rng.choice('+- ')}    {statement}")
        texts.append("\n".join(lines))
    return texts


def _peak_rss_mb() -> float:
    """This process's peak RSS. Linux's ``VmHWM`` belongs to the address space, so it starts afresh at
    exec; ``ru_maxrss`` (the fallback elsewhere) would inherit the parent's size at fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _child(args: argparse.Namespace) -> None:
    texts = json.loads(Path(args.texts_file).read_text(encoding="utf-8"))
    started = time.perf_counter()
    embedder = Embedder(
        optimize=args.variant == "optimized",
        max_tokens=args.window,
        batch_size=args.batch_size,
        batch_tokens=args.batch_tokens,
        threads=args.threads,
        cache_dir=Path(args.cache_dir),
        sort_by_length=args.sort == "sorted",
    )
    embedder.embed(texts[:4])  # load + warm up
    load_s = time.perf_counter() - started
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    for _ in range(args.runs):
        begin, cpu_begin = time.perf_counter(), time.process_time()
        embedder.embed(texts)
        seconds.append(time.perf_counter() - begin)
        cpu_seconds.append(time.process_time() - cpu_begin)
    result: dict[str, Any] = {
        "model_id": embedder.model_id,
        "load_s": load_s,
        "texts_per_s": len(texts) / statistics.median(seconds),
        "runs_s": seconds,
        "texts_per_cpu_s": len(texts) / statistics.median(cpu_seconds),
        "peak_rss_mb": _peak_rss_mb(),
    }
    print(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backstory.evaluation.models_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--texts", type=int, default=256, help="number of synthetic texts (default 256)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per configuration; median reported")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="tokens per text (default %(default)s)")
    parser.add_argument("--batch-tokens", type=int, default=256, help="padded tokens per forward pass")
    parser.add_argument("--threads", type=int, default=2, help="batches run at once (one core each)")
    parser.add_argument("--cache-dir", default=None, help="cache root for the optimized model (default: user cache)")
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "SORT"), help=argparse.SUPPRESS)
    parser.add_argument("--texts-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    if args.child:
        args.variant, args.sort = args.child
        args.cache_dir = str(cache_dir)
        _child(args)
        return 0

    files = resolve_model(cache_dir=cache_dir)
    tokenizer = Tokenizer.from_file(str(files.tokenizer_path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    texts = synthetic_texts(args.texts, tokenizer)
    lengths = [min(len(tokenizer.encode(t).ids), args.window) for t in texts]
    print(
        f"{len(texts)} synthetic diff texts, {statistics.mean(lengths):.0f} tokens on average after truncation "
        f"to {args.window} (min {min(lengths)}, max {max(lengths)}); batch {args.batch_size} / "
        f"{args.batch_tokens} tokens, {args.threads} threads, "
        f"median of {args.runs} runs; load average {_load_average()}"
    )

    started = time.perf_counter()
    optimized = Embedder(optimize=True, cache_dir=cache_dir)
    print(
        f"optimized model: {optimized.files.onnx_path} ({optimized.model_id}), ready in "
        f"{time.perf_counter() - started:.1f}s (includes conversion if it was not cached)"
    )
    del optimized

    with tempfile.TemporaryDirectory() as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        print(
            f"{'model':<10} {'batches':<9} {'texts/s':>8} {'texts/cpu-s':>11} {'runs (s)':>22} {'load s':>7} "
            f"{'peak RSS':>9}"
        )
        for variant in ("shipped", "optimized"):
            for sort in ("sorted", "unsorted"):
                command = [
                    sys.executable, "-m", "backstory.evaluation.models_bench", "--child", variant, sort,
                    "--texts-file", str(texts_file), "--runs", str(args.runs),
                    "--batch-size", str(args.batch_size), "--batch-tokens", str(args.batch_tokens),
                    "--window", str(args.window),
                    "--threads", str(args.threads),
                    "--cache-dir", str(cache_dir),
                ]  # fmt: skip
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"{variant} {sort}: failed\n{done.stderr[-2000:]}")
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                runs = " ".join(f"{s:.2f}" for s in row["runs_s"])
                print(
                    f"{variant:<10} {sort:<9} {row['texts_per_s']:8.1f} {row['texts_per_cpu_s']:11.1f} {runs:>22} "
                    f"{row['load_s']:7.2f} "
                    f"{row['peak_rss_mb']:7.0f}MB"
                )
    print(f"load average now {_load_average()} (texts/cpu-s is the steadier figure on a busy machine)")
    print(
        "note: both graphs batch (the optimized one quantizes activations per token, so batch mates cannot "
        "change each other's vectors); `threads` batches run at once, each on one core."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
