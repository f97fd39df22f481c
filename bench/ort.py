"""ONNX Runtime (CPU) timings for the comparison scripts, through bench/ort_run.js and
onnxruntime-node (`make bench` installs it in bench/node_modules)."""
import os
import shutil
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def available():
    return bool(shutil.which("node")) and os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node"))


def median_ms(onnx_path, x, runs):
    """ORT's median run time of an f32 model given one input array `x` or a list of them (in the
    model's input order), or None when ORT is not installed."""
    if not available():
        return None
    inputs = x if isinstance(x, (list, tuple)) else [x]
    with tempfile.TemporaryDirectory() as d:
        args = ["node", os.path.join(HERE, "ort_run.js"), onnx_path, str(runs)]
        for i, a in enumerate(inputs):
            data = os.path.join(d, f"x{i}.f32")
            a.astype(np.float32).tofile(data)
            args += [data, ",".join(map(str, a.shape))]
        out = subprocess.run(args, capture_output=True, text=True, cwd=HERE)
        return float(out.stdout) if out.returncode == 0 else None
