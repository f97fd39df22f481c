"""ONNX external data, read only from inside the model's folder. A tensor may keep its bytes in
another file (`external_data`: location, offset, length); onnx's own loader joins the location
to a base folder as written, so a model could read any file the process can (an absolute path,
`..`, a link leading out) or /dev/zero until memory runs out. Here, as in ONNX Runtime, the
location must resolve inside the model's folder to a regular file that holds the bytes named."""
import os

from onnx import TensorProto
from onnx.external_data_helper import ExternalDataInfo, uses_external_data

from .._C import FormatError


def body_tensors(graph):
    """The tensors of a graph that are not its initializers: attribute tensors (Constant's), and
    every tensor of the bodies (If, Loop, Scan), initializers there included."""
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from g.initializer
                yield from body_tensors(g)


def external_span(t, base_dir):
    """(path, offset, length) of a tensor's external data, checked: inside `base_dir`, a regular
    file, in range. `base_dir` None: the model came as bytes or a ModelProto, and its external
    data is refused. Anything else wrong is a FormatError naming the tensor."""
    try:
        info = ExternalDataInfo(t)
        offset, length = int(info.offset or 0), int(info.length or 0)
    except ValueError as e:  # an offset or length that is no number
        raise FormatError(f"tensor `{t.name}`: malformed external data: {e}") from None
    where = f"tensor `{t.name}`: external data `{info.location}`"
    if "\0" in info.location:
        raise FormatError(f"{where}: the location holds a NUL character")
    if offset < 0 or length < 0:
        raise FormatError(f"{where}: a negative offset ({offset}) or length ({length})")
    if base_dir is None:
        raise FormatError(f"{where}: a model given as bytes or a ModelProto reads external data only from a folder "
                          "passed as base_dir")
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, info.location))
    if os.path.isabs(info.location) or os.path.commonpath([root, path]) != root:
        raise FormatError(f"{where} is outside the model's folder {root}")
    if not os.path.isfile(path):
        raise FormatError(f"{where}: no regular file at {path}")
    size = os.path.getsize(path)
    if offset > size or offset + length > size:
        raise FormatError(f"{where}: offset {offset} and length {length} run past the {size}-byte file")
    return path, offset, length if length else size - offset


def needs_external_data(model):
    """Whether a tensor other than the main graph's initializers (which the importer reads
    itself, esgraph.onnx._weights) keeps its bytes in another file."""
    return any(uses_external_data(t) for t in body_tensors(model.graph))


def load_external_data(model, base_dir):
    """Reads the external data of every tensor but the main graph's initializers into the
    tensor, from `base_dir` only."""
    for t in body_tensors(model.graph):
        if not uses_external_data(t):
            continue
        path, offset, length = external_span(t, base_dir)
        with open(path, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT
