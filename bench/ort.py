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
    """ORT's median run time of a one-input f32 model, or None when ORT is not installed."""
    if not available():
        return None
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "x.f32")
        x.astype(np.float32).tofile(data)
        out = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), onnx_path, data, ",".join(map(str, x.shape)),
                              str(runs)], capture_output=True, text=True, cwd=HERE)
        return float(out.stdout) if out.returncode == 0 else None
