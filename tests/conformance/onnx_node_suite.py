"""ONNX's backend node test cases, run through esgraph: import -> compile -> CPU run -> compare.

The cases come from the generators Debian's python3-onnx ships (onnx.backend.test.case.node);
their expected outputs are ONNX's own numpy references, so nothing here is checked against
esgraph's own output.
"""
import collections
import warnings

import numpy as np

# The generators were written for numpy < 1.24, which still had these aliases.
for _alias, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _alias not in np.__dict__:
        setattr(np, _alias, _type)

# `shape_inputs`: the inputs whose values the case's graph waited for (read at run time).
Result = collections.namedtuple("Result", "case op status reason shape_inputs", defaults=((),))
PASS, UNSUPPORTED, MISMATCH, ERROR = "pass", "unsupported", "mismatch", "error"


def collect():
    """Every generated node test case: (name, op type, model, data sets, rtol, atol)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case import node
        cases = node.collect_testcases(None) if "op_type" in node.collect_testcases.__code__.co_varnames \
            else node.collect_testcases()
    return [c for c in cases if c.kind == "node"]


def collect_models():
    """ONNX's model test cases that come with their model ("simple"); the "real" ones are
    downloads, which the project never makes."""
    from onnx.backend.test.case import model
    return [c for c in model.collect_testcases() if c.kind == "simple"]


def ops_of(cases):
    """{case name: the op type it tests}. An `_expanded` case runs the op's function body, so
    it counts for the op of its unexpanded twin."""
    direct = {c.name: c.model.graph.node[0].op_type for c in cases if c.model.graph.node}
    return {name: direct.get(name.replace("_expanded", ""), op) for name, op in direct.items()}


def _compare(expected, got, rtol, atol):
    if expected.dtype.name == "bfloat16":  # esgraph gives bf16 as its bit patterns: compare the values
        if got.dtype != np.uint16:
            return f"dtype {got.dtype}, expected bf16 bit patterns (uint16)"
        expected, got = expected.astype(np.float32), got.view(expected.dtype).astype(np.float32)
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    if expected.dtype.kind in "fc":
        bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != expected
    if bad.any():
        i = np.flatnonzero(bad)[0]
        return (f"{int(bad.sum())} of {bad.size} elements differ, first at flat index {i}: "
                f"{got.reshape(-1)[i]!r}, expected {expected.reshape(-1)[i]!r}")
    return None


def _array(value, bits=True):
    """A case's value as esgraph takes it: newer onnx releases keep some as TensorProtos, and
    bf16 as ml_dtypes' bfloat16, which esgraph takes as its bit patterns (uint16; `bits`).
    Lists (sequences) and None (empty optionals) keep their form."""
    if isinstance(value, list):
        return [_array(v, bits) for v in value]
    if value is None:
        return None
    if not isinstance(value, np.ndarray) and hasattr(value, "data_type"):
        from onnx import numpy_helper
        value = numpy_helper.to_array(value)
    value = np.asarray(value)
    return value.view(np.uint16) if bits and value.dtype.name == "bfloat16" else value


def _shape_of(value):
    """What load's input_shapes takes for a value: a shape, a list of shapes for a sequence,
    None for an empty optional."""
    if value is None:
        return None
    if isinstance(value, list):
        return [list(np.shape(v)) for v in value]
    return list(np.shape(value))


def _compare_value(expected, got, rtol, atol):
    """_compare for a tensor, element by element for a sequence (a list), or both None."""
    if expected is None or got is None:
        return None if expected is None and got is None else f"{got!r:.60}, expected {expected!r:.60}"
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return f"{type(got).__name__} of {len(got) if isinstance(got, list) else '-'}, expected a list of {len(expected)}"
        for k, (e, g) in enumerate(zip(expected, got)):
            why = _compare(np.asarray(e), g, rtol, atol)
            if why:
                return f"element {k}: {why}"
        return None
    return _compare(np.asarray(expected), got, rtol, atol)


def run_case(case, op, esgraph):
    """One case's Result; every exception becomes a reason, never a crash of the whole run."""
    names = [vi.name for vi in case.model.graph.input]
    try:
        # The data's own shapes are the input shapes: a few cases declare others for inputs only
        # their dtype matters for (CastLike's `like`). Shape operands passed as inputs stay
        # inputs: the graph waits for their values (esgraph.onnx.ValueDependentGraph).
        values = dict(zip(names, map(_array, case.data_sets[0][0])))
        graph = esgraph.onnx.load(case.model, input_shapes={k: _shape_of(v) for k, v in values.items()})
    except esgraph.onnx.ImportFailed as e:
        return Result(case.name, op, UNSUPPORTED, "; ".join(why for _, why in e.failures))
    except Exception as e:  # noqa: BLE001 — reported per case
        return Result(case.name, op, ERROR, f"import: {type(e).__name__}: {e}")
    try:
        model = esgraph.compile(graph)
        for inputs, outputs in case.data_sets:
            inputs, outputs = [_array(v) for v in inputs], [_array(v, bits=False) for v in outputs]
            try:
                got = model.run(inputs)
            except esgraph.onnx.ImportFailed as e:  # what the values let the importer see
                return Result(case.name, op, UNSUPPORTED, "; ".join(why for _, why in e.failures))
            if len(got) != len(outputs):
                return Result(case.name, op, MISMATCH, f"{len(got)} outputs, expected {len(outputs)}")
            for k, (e, g) in enumerate(zip(outputs, got)):
                why = _compare_value(e, g, case.rtol, case.atol)
                if why:
                    return Result(case.name, op, MISMATCH, f"output {k}: {why}")
    except Exception as e:  # noqa: BLE001
        return Result(case.name, op, ERROR, f"{type(e).__name__}: {e}".splitlines()[0])
    return Result(case.name, op, PASS, "", tuple(getattr(graph, "shape_inputs", ())))

