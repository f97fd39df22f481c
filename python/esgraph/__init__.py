"""esgraph: build neural-network graphs eagerly, with every shape known as you write.

    import numpy as np
    import esgraph
    from esgraph import ops

    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, ["batch", 784])
        w = np.random.rand(784, 10).astype(np.float32)
        y = ops.softmax(x @ w + 1.0)
        print(y.shape)            # ('batch', 10)
    graph = b.build([y])
    print(graph)

Errors are raised where an expression is written: `esgraph.ShapeError` (a `ValueError`),
`esgraph.DTypeError` (a `TypeError`), and so on, all subclasses of `esgraph.Error`.
"""
import numbers
import os
import re

import numpy as _np

from ._C import (AttributeValueError, BackendError, CancelledError, CommunicationError, DType, DTypeError, Error, FormatError,
                 Graph, GraphBuilder, GraphIOError, InvalidArgumentError, LifetimeError, LimitError, Model,
                 Quantized, QuantizedLayer, ShapeError, Tensor, UnsupportedError, __version__, backends, constant, load_model,
                 world)
from ._C import quantize as _quantize_graph
from ._C import compile as _compile_graph
from ._C import bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from . import ops

bool_ = getattr(__import__("esgraph._C", fromlist=["_C"]), "bool")


# The options compile takes, with their types: the keyword-only part of the binding's signature,
# the first line of its docstring ("compile(graph: object, *, streams: int = 1, ...)"), so the
# list cannot drift.
_COMPILE_OPTIONS = dict(re.findall(r"(\w+): ([\w\[\], ]+?) = ", _compile_graph.__doc__.split("\n", 1)[0].split("*,", 1)[1]))
# What an option's type takes, to name the one pybind11 refused (it says only that one was).
_TAKES = {"int": lambda v: isinstance(v, numbers.Integral), "bool": lambda v: isinstance(v, (bool, _np.bool_)),
          "str": lambda v: isinstance(v, str), "Dict[str, int]": lambda v: isinstance(v, dict) and all(
              isinstance(k, str) and isinstance(x, numbers.Integral) for k, x in v.items()),
          "Dict[str, object]": lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v)}


def compile(graph, **options):  # noqa: A001 - the library's one verb for it
    unknown = sorted(set(options) - set(_COMPILE_OPTIONS))
    if unknown:  # pybind11 would print every overload's signature
        raise TypeError(f"compile: no option {', '.join(f'`{u}`' for u in unknown)} (it takes {', '.join(_COMPILE_OPTIONS)})")
    try:
        # A graph whose structure waits for input values (esgraph.onnx.ValueDependentGraph)
        # compiles itself: one graph per set of those values.
        if not isinstance(graph, Graph) and hasattr(graph, "graph_for"):
            return graph.compile(**options)
        if isinstance(graph, (str, os.PathLike)):
            return _compile_file(os.fspath(graph), **options)
        return _compile_graph(graph, **options)
    except TypeError as e:
        # pybind11 refused an option's type, printing the whole signature: the option is named
        # instead (what pybind11 converts, numpy's integers for ints say, stays accepted).
        wrong = [name for name, value in options.items() if not _TAKES.get(_COMPILE_OPTIONS[name], lambda v: True)(value)]
        if "incompatible function arguments" not in str(e) or not wrong:
            raise
        name = wrong[0]
        raise TypeError(f"compile: option `{name}` takes {_COMPILE_OPTIONS[name]}, got {type(options[name]).__name__} "
                        f"{options[name]!r}") from None


def _compile_file(path, **options):
    """An ONNX file (.onnx) or a graph file, through the compile cache when there is one: a hit
    skips the import as well as the compile."""
    if options.get("cache_dir") or os.environ.get("ESG_CACHE_DIR"):
        found = _compile_graph(path, **options)
        if found is not None:
            return found
        options["cache_source"] = path
    if path.endswith(".onnx"):
        from . import onnx as _onnx
        graph = _onnx.load(path)
        if not isinstance(graph, Graph):  # waits for input values: compiled per set of them, not cached
            options.pop("cache_source", None)
            return graph.compile(**options)
    else:
        graph = Graph.load(path)
    return _compile_graph(graph, **options)


compile.__doc__ = _compile_graph.__doc__


def quantize(graph, calibration=(), **options):
    if not isinstance(graph, Graph):  # a ValueDependentGraph waits for input values to have a graph at all
        raise TypeError(f"quantize: a Graph to quantize, got {type(graph).__name__}"
                        + (": its shapes wait for the values of its inputs; import it with the input_shapes= or "
                              "constants= that fix them"
                           if hasattr(graph, "shape_inputs") else ""))
    return _quantize_graph(graph, calibration, **options)


quantize.__doc__ = _quantize_graph.__doc__

__all__ = [
    "AttributeValueError", "BackendError", "CancelledError", "CommunicationError", "DType", "DTypeError", "Error", "FormatError", "Graph", "GraphBuilder",
    "GraphIOError", "InvalidArgumentError", "LifetimeError", "LimitError", "Model", "Quantized", "QuantizedLayer", "ShapeError", "Tensor",
    "UnsupportedError", "backends", "compile", "constant", "load_model", "ops", "quantize", "bf16", "bool_", "f16", "f32", "f64", "i8", "i16",
    "i32", "i64", "u8", "u16", "u32", "u64", "world",
]
