"""The main graph's initializers, read straight into the arrays the graph's constants use.

Parsed whole, an ONNX file's weights are held three times while importing: the file's bytes,
protobuf's message, and numpy's copies (ViT-B/16: 1 GiB for 330 MiB of weights). Instead, the
file is mapped and its large initializers are cut out of the bytes protobuf parses: each
becomes ONNX external data pointing back into the model file, so the parsed model stays a valid
ONNX model. The importer then reads each one from the file into an array of its own, made
read-only, which the graph's constant reads in place (esgraph.constant(copy=False)). Tensors in
other files are read the same way, checked as _external.py says."""
import mmap
import os

import numpy as np
from onnx import TensorProto, numpy_helper
from onnx.external_data_helper import uses_external_data

from .. import _C
from .._C import FormatError
from .._folding import line_offset
from . import _dtypes, _wire
from ._external import external_span

# Field numbers (onnx.proto): ModelProto.graph, GraphProto.initializer, TensorProto's data_type,
# raw_data, external_data and data_location, StringStringEntryProto's key and value.
_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_TENSOR_DATA_TYPE, _TENSOR_RAW_DATA, _TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 2, 9, 13, 14
_ENTRY_KEY, _ENTRY_VALUE = 1, 2

# Smaller initializers stay in the parsed model: reading them apart would cost more than it saves.
_APART_BYTES = 64 * 1024
# Smaller files are parsed whole: they hold little to save, and scanning a graph of many nodes
# field by field in Python costs more than protobuf's parse.
_SPLIT_FILES_FROM = 1 << 20

# The element types whose raw bytes are their numpy array as they are (bf16 is converted).
_PLAIN = {onnx_type: _dtypes.numpy_dtype(dtype) for onnx_type, dtype in _dtypes.ONNX_TO_ESG.items() if dtype != _C.bf16}


def _external_entry(key, value):
    return _wire.length_delimited(_TENSOR_EXTERNAL_DATA, _wire.length_delimited(_ENTRY_KEY, key.encode()) +
                                  _wire.length_delimited(_ENTRY_VALUE, value.encode()))


def _initializer_apart(data, tensor, location):
    """The bytes of an initializer message whose raw data is left in the file (as external data
    at its own place), and that place; None when it stays as it is: small, of a type that is
    not plain, or unusual (two raw_data fields, external data already)."""
    parts = list(_wire.fields(data, tensor.begin, tensor.end))
    raw = [f for f in parts if f.number == _TENSOR_RAW_DATA]
    types = [f for f in parts if f.number == _TENSOR_DATA_TYPE and f.wire == 0]
    if (len(raw) != 1 or raw[0].wire != 2 or raw[0].end - raw[0].begin < _APART_BYTES or len(types) != 1
            or _wire.varint(data, types[0].begin)[0] not in _PLAIN
            or any(f.number in (_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION) for f in parts)):
        return None
    offset, length = raw[0].begin, raw[0].end - raw[0].begin
    kept = b"".join(data[f.key:f.end] for f in parts if f is not raw[0])
    kept += (_external_entry("location", location) + _external_entry("offset", str(offset)) +
             _external_entry("length", str(length)) +
             _wire.encode_varint(_TENSOR_DATA_LOCATION << 3) + _wire.encode_varint(TensorProto.EXTERNAL))
    return _wire.length_delimited(_GRAPH_INITIALIZER, kept), (offset, length)


def split_weights(data, location):
    """(the bytes to parse, {initializer index: (offset, length)}) for a serialized ModelProto
    whose large initializers are left in `data`, the file called `location` in its folder.
    Bytes that are not such a model come back whole (as bytes), with nothing apart: protobuf's
    parser then says what is wrong with them."""
    if len(data) < _SPLIT_FILES_FROM:
        return bytes(data), {}
    try:
        model = list(_wire.fields(data, 0, len(data)))
        graphs = [f for f in model if f.number == _MODEL_GRAPH]
        if len(graphs) != 1 or graphs[0].wire != 2:
            return bytes(data), {}
        graph, index, apart, pieces = graphs[0], 0, {}, []
        for f in _wire.fields(data, graph.begin, graph.end):
            cut = _initializer_apart(data, f, location) if f.number == _GRAPH_INITIALIZER and f.wire == 2 else None
            if cut is None:
                pieces.append(data[f.key:f.end])
            else:
                pieces.append(cut[0])
                apart[index] = cut[1]
            index += f.number == _GRAPH_INITIALIZER
    except ValueError:
        return bytes(data), {}
    if not apart:
        return bytes(data), {}
    graph_bytes = _wire.length_delimited(_MODEL_GRAPH, b"".join(pieces))
    return b"".join(graph_bytes if f is graph else data[f.key:f.end] for f in model), apart


def open_file(path):
    """The open file and its bytes, mapped read-only (an empty file's as b"": mmap refuses
    length 0). The weights are read from the file as opened, whatever replaces it by name."""
    f = open(path, "rb")
    try:
        if os.fstat(f.fileno()).st_size == 0:
            return f, b""
        return f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except BaseException:
        f.close()
        raise


class Weights:
    """Reads the main graph's initializers: those left in the model file (by index), those in
    other files (external data, from `base_dir` only), and those inline in the message. Every
    array is read-only and read once; a model that compiles a graph per set of values imports
    again from the arrays already read."""

    def __init__(self, base_dir=None, file=None, apart=None):
        self.base_dir = base_dir
        self._file = file  # the model file as opened, for the initializers left in it
        self._apart = dict(apart or {})
        self._read = {}

    def close(self):
        """Closes the model file; initializers read so far stay."""
        if self._file is not None:
            self._file.close()

    def array(self, index, tensor):
        """The initializer's value; ValueError or TypeError when its data does not fit its
        dims or type (as numpy_helper's), FormatError for external data that is not there."""
        if index not in self._read:
            if index in self._apart:
                if self._file.closed:
                    raise FormatError(f"initializer `{tensor.name}`: the model file was closed before it was read")
                array = _read_span(tensor, self._file.fileno(), *self._apart[index])
            elif uses_external_data(tensor) and tensor.data_type in _PLAIN:
                path, offset, length = external_span(tensor, self.base_dir)
                with open(path, "rb") as f:
                    array = _read_span(tensor, f.fileno(), offset, length)
            else:
                if uses_external_data(tensor):  # bf16 and the like: into the message, then as numpy reads it
                    tensor = self._with_raw_data(tensor)
                array = numpy_helper.to_array(tensor)
                array.setflags(write=False)
            self._read[index] = array
        return self._read[index]

    def _with_raw_data(self, tensor):
        path, offset, length = external_span(tensor, self.base_dir)
        loaded = TensorProto()
        loaded.CopyFrom(tensor)
        with open(path, "rb") as f:
            loaded.raw_data = os.pread(f.fileno(), length, offset)
        del loaded.external_data[:]
        loaded.data_location = TensorProto.DEFAULT
        return loaded


def _read_span(tensor, fd, offset, length):
    """The `length` bytes at `offset` of the open file as the tensor's array, read into memory
    of its own, where the CPU's kernels read it best (line_offset)."""
    dtype = _PLAIN[tensor.data_type]
    count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
    if count * dtype.itemsize != length:
        raise ValueError(f"its {length} bytes of data do not hold {list(tensor.dims)} {dtype} elements")
    buffer = np.empty(length + 128, np.uint8)
    start = -buffer.ctypes.data % 64 + line_offset(tensor.dims, dtype.itemsize)
    view = memoryview(buffer[start:start + length])
    done = 0
    while done < length:
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise ValueError(f"the file ended {length - done} bytes before the end of its data")
        done += got
    array = buffer[start:start + length].view(dtype).reshape(tuple(tensor.dims))
    array.setflags(write=False)
    return array
