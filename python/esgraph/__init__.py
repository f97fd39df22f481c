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
from ._C import (AttributeValueError, BackendError, CancelledError, DType, DTypeError, Error, FormatError,
                 Graph, GraphBuilder, GraphIOError, InvalidArgumentError, LifetimeError, LimitError, Model,
                 ShapeError, Tensor, UnsupportedError, __version__, compile, constant)
from ._C import bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from . import ops

bool_ = getattr(__import__("esgraph._C", fromlist=["_C"]), "bool")

__all__ = [
    "AttributeValueError", "BackendError", "CancelledError", "DType", "DTypeError", "Error", "FormatError", "Graph", "GraphBuilder",
    "GraphIOError", "InvalidArgumentError", "LifetimeError", "LimitError", "Model", "ShapeError", "Tensor",
    "UnsupportedError", "compile", "constant", "ops", "bf16", "bool_", "f16", "f32", "f64", "i8", "i16",
    "i32", "i64", "u8", "u16", "u32", "u64",
]
