"""The peers esgraph is measured against, in this process, each given esgraph's thread count:
ONNX Runtime (CPU) and OpenVINO (CPU), from requirements.txt. A peer runs an ONNX file on the
inputs given in the model's input order, of any dtype (a BERT's int64 token ids as well as f32
images); `runner` returns a function that runs it once, and `versions` names what is measured.

Equal threads: ORT's intra-op pool gets `threads` (the caller's thread among them) and one
inter-op thread, OpenVINO `INFERENCE_NUM_THREADS`; PyTorch's `torch.set_num_threads` is the
caller's to set.
"""
import os

THREADS = os.cpu_count()  # esgraph's default (threads=0: every core)

try:
    import onnxruntime
except ImportError:  # pragma: no cover - requirements.txt installs it
    onnxruntime = None
try:
    import openvino
except ImportError:  # pragma: no cover
    openvino = None


def available():
    """The peers installed, by name."""
    return [name for name, module in (("ORT", onnxruntime), ("OpenVINO", openvino)) if module]


def versions():
    parts = []
    if onnxruntime:
        parts.append(f"onnxruntime {onnxruntime.__version__}")
    if openvino:
        parts.append(f"openvino {openvino.__version__}")
    return ", ".join(parts) or "no peer installed"


def ort_session(path, threads=THREADS):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_runner(path, inputs, threads=THREADS):
    """A function that runs the ONNX file once in ORT on `inputs` (a list, in the model's input
    order) and returns its outputs."""
    session = ort_session(path, threads)
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
    return lambda: session.run(None, feeds)


def openvino_runner(path, inputs, threads=THREADS):
    """The same in OpenVINO, compiled for latency on `threads` threads."""
    core = openvino.Core()
    # f32 as the file says: on a CPU with AVX512-BF16 or AMX, OpenVINO computes in bf16 unless told
    # (on a Zen 4, ResNet-50's output then failed cnn_models.py's check against PyTorch).
    compiled = core.compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    feeds = {i: a for i, a in enumerate(inputs)}
    return lambda: request.infer(feeds)


def runner(peer, path, inputs, threads=THREADS):
    """The run function of `peer` ("ORT" or "OpenVINO"), or None when it is not installed."""
    if peer not in available():
        return None
    make = {"ORT": ort_runner, "OpenVINO": openvino_runner}[peer]
    return make(path, inputs if isinstance(inputs, (list, tuple)) else [inputs], threads)
