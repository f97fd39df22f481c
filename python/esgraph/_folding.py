"""What the model importers (esgraph.onnx, esgraph.tensorflow) share while they build a graph:
the graph's constants, one per known array, and folding: a node whose inputs are all known while
importing is converted in a scratch builder, compiled and run by esgraph itself, so folding uses
the same kernels as the imported model, within a memory cap."""
import contextvars
import math

import numpy as np

from . import _C

# The import under way (a FoldingImporter), whose memory cap the converters' own arrays count against.
current_import = contextvars.ContextVar("esgraph_import", default=None)


def line_offset(dims, itemsize):
    """How far past a cache line an array of these dims starts: ir/builder.cpp's rule for the
    constants it copies (constant_line_offset), which arrays read in place follow too. A matrix whose
    rows lie a multiple of 4 KiB apart starts 16 bytes past one (a kernel reading its rows in
    place maps each to one L1 set from a line), others on one."""
    row_bytes = dims[-1] * itemsize if len(dims) >= 2 else 0
    return 16 if row_bytes > 0 and row_bytes % 4096 == 0 else 0


class FoldingImporter:
    """The base of an importer: `as_tensor` makes graph constants, `fold` computes a node's
    outputs while importing, and `reserve` holds converters' own arrays against the cap.
    `refused` is the importer's exception for a node it cannot convert."""

    refused = ValueError

    def __init__(self, max_memory_bytes):
        self.max_memory_bytes = max_memory_bytes  # 0: no cap
        self.folded_bytes = 0  # of the arrays folding computed, and converters made, so far
        self._builder = None
        self._constants = {}  # id(array) -> (array, tensor) of the builder in use

    def run(self, builder):
        """The importer's `_run(builder)`, the import under way for the converters (reserve)."""
        token = current_import.set(self)
        try:
            return self._run(builder)
        finally:
            current_import.reset(token)

    def as_tensor(self, array):
        # One esgraph constant per known array and builder, however many nodes read it. A
        # read-only array (a weight) is read in place; one computed here is copied.
        key = id(array)
        if key not in self._constants:  # the array is kept alive with its tensor: ids stay unique
            # Rows a multiple of 4 KiB apart belong 16 bytes past a cache line (line_offset):
            # an array elsewhere is copied, which places it.
            placed = line_offset(array.shape, array.itemsize) == 0 or array.ctypes.data % 64 == 16
            in_place = (not array.flags.writeable and array.flags.c_contiguous and array.ctypes.data % max(array.itemsize, 1) == 0
                        and placed)
            tensor = _C.constant(array, copy=False) if in_place else _C.constant(np.require(array, requirements="C"))
            self._constants[key] = (array, tensor)
        return self._constants[key][1]

    def constant_names(self):
        """The names of the constants made so far (an output may not take them)."""
        return {t.name for _, t in self._constants.values()}

    def reserve(self, nbytes, kept, what):
        """Checks `nbytes` a converter is about to make against the cap, and holds the `kept` of
        them that stay (onnx/converters/registry.reserve)."""
        if self.max_memory_bytes and self.folded_bytes + nbytes > self.max_memory_bytes:
            raise self.refused(f"{what} would take {nbytes} bytes while importing, beyond the import's memory cap "
                               f"({self.max_memory_bytes} bytes, {self.folded_bytes} held): load(max_memory_bytes=...) sets it, 0 for none")
        self.folded_bytes += kept

    def fold(self, convert):
        """`convert()`'s outputs (one value or a list) computed now: it runs in a scratch builder,
        and its tensors are compiled and run; arrays it returns stay as they are. A bf16 result
        (numpy has no bf16) raises DTypeError, one beyond what is left of the cap LimitError:
        the caller converts the node into the graph instead."""
        outer = self._builder, self._constants
        with _C.GraphBuilder("fold") as scratch:
            self._builder, self._constants = scratch, {}
            try:
                outputs = convert()
            finally:
                self._builder, self._constants = outer
            single = not isinstance(outputs, (list, tuple))
            outputs = [outputs] if single else list(outputs)
            tensors = [o for o in outputs if isinstance(o, _C.Tensor)]
            if any(t.dtype == _C.bf16 for t in tensors):  # numpy holds bf16 only as bits: left to run time
                raise _C.DTypeError("a bf16 result is not folded")
            if tensors:
                # Within what is left of the cap, checked by the plan before anything is allocated.
                left = self.max_memory_bytes - self.folded_bytes if self.max_memory_bytes else 0
                if self.max_memory_bytes and left <= 0:
                    raise _C.LimitError("import: folding has used its memory")
                results = _C.compile(scratch.build(tensors), max_memory_bytes=left).run([])
                for r in results:  # read in place by the graph's constants, as the weights are
                    r.setflags(write=False)
                    self.folded_bytes += r.nbytes
                results = iter(results)
                outputs = [next(results) if isinstance(o, _C.Tensor) else o for o in outputs]
        return outputs[0] if single else outputs


def reserve(shape, itemsize, what, kept):
    """Room for the arrays of `shape` (`itemsize` bytes an element, all of them together) that a
    converter is about to make while importing: an index table, a mask, an interpolation or
    Fourier matrix, sized by the model's shapes and constants. Beyond what is left of load()'s
    max_memory_bytes the node is refused, naming them, before anything is allocated: a small
    file cannot make the import fill the machine. `kept` bytes an element stay, as the graph's
    constants, and count against the cap from then on; the rest are temporaries."""
    importer = current_import.get()
    if importer is not None:
        elements = math.prod(int(d) for d in shape)
        importer.reserve(elements * itemsize, elements * kept, what)
