"""The weight patch backstory ships: the initializers a fine-tuned graph changed, plus the base's sha256.

usage: python make_patch.py TRAINED.onnx server/backstory/models/data/minilm-bs7.npz
"""

import hashlib
import sys
from pathlib import Path

import numpy as np
import onnx
from minilm import base_paths
from onnx import numpy_helper


def main() -> None:
    trained, out = sys.argv[1], sys.argv[2]
    src, _ = base_paths()
    base = {i.name: numpy_helper.to_array(i) for i in onnx.load(src).graph.initializer}
    new = {i.name: numpy_helper.to_array(i) for i in onnx.load(trained).graph.initializer}
    assert base.keys() == new.keys(), "not the same graph"
    changed = {k: v for k, v in new.items() if not np.array_equal(v, base[k])}
    sha = hashlib.sha256(Path(src).read_bytes()).hexdigest()
    np.savez_compressed(out, __base_sha256__=np.array(sha), **changed)
    print(len(changed), "tensors changed ->", out)


if __name__ == "__main__":
    main()
