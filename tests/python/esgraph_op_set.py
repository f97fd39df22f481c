"""The op set of op_defs/, loaded with the codegen's loader (importable by the test modules;
the name is unique so that it cannot clash with another suite's conftest)."""
import keyword
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "codegen") not in sys.path:
    sys.path.insert(0, str(REPO / "codegen"))

import numpy as np  # noqa: E402

import esgraph  # noqa: E402
from esgraph import ops  # noqa: E402
from esgraph_codegen import loader  # noqa: E402

OP_SET = loader.load_dir(REPO / "op_defs", REPO / "compiler_core/ir/infer_rules.def")


def py_name(op_name):
    """The name of an op in esgraph.ops: a trailing `_` where it is a Python keyword."""
    return op_name + "_" if keyword.iskeyword(op_name) else op_name


NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i8": np.int8,
                "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
                "u64": np.uint64, "bool": np.bool_}


def example_tensors(spec):
    """An example's tensor spec as a list (a variadic input or output holds several)."""
    return list(spec) if isinstance(spec, tuple) else [spec]


def example_array(t):
    return np.array(t.value, dtype=NUMPY_DTYPES[t.dtype])


def value_examples():
    """(op, example) for every YAML example whose inputs and outputs all have values."""
    def complete(example):
        tensors = [t for _, spec in example.inputs + example.outputs for t in example_tensors(spec)]
        return all(t.value is not None for t in tensors)
    return [(op, example) for op in OP_SET.ops for example in op.examples if complete(example)]


def build_value_example(op, example):
    """The example as a graph with one input per input tensor: (graph, feeds, expected arrays).
    Required attributes go positionally after the required inputs, as the bindings document."""
    given = dict(example.inputs)
    attrs = {name: list(v) if isinstance(v, tuple) else v for name, v in example.attrs}
    feeds = []
    with esgraph.GraphBuilder(op.name) as b:
        def tensor(name, t):
            feeds.append(example_array(t))
            return b.input(name, t.dtype, list(t.shape))

        args, kwargs = [], {}
        for inp in op.inputs:
            if inp.name not in given:
                continue
            if inp.variadic:
                value = [tensor(f"{inp.name}{i}", t) for i, t in enumerate(given[inp.name])]
            else:
                value = tensor(inp.name, given[inp.name])
            if inp.optional:
                kwargs[inp.name] = value
            else:
                args.append(value)
        args.extend(attrs.pop(attr.name) for attr in op.required_attrs)
        result = getattr(ops, py_name(op.name))(*args, **attrs, **kwargs)
    results = result if isinstance(result, list) else [result]
    return b.build(results), feeds, [example_array(t) for t in expected_tensors(op, example)]


def expected_tensors(op, example):
    """The example's output tensors in the op's result order (a list output expanded)."""
    given = dict(example.outputs)
    return [t for out in op.outputs for t in example_tensors(given[out.name])]

