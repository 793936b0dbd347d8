"""Backstory: find prior art in a repository's own git history."""

import os

# Our numpy products are small (a query against a few hundred vectors or token states); OpenBLAS's thread pool
# costs more to wake than they take and competes with onnxruntime's own threads on 2 cores (fused search went
# from 14 to 30 ms p50 when a product woke it). Set before numpy is imported; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
