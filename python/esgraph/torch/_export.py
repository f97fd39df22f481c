"""torch.export programs as esgraph graphs."""
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from .._frontend import ImportFailed
from ._backend import decompositions
from ._graph import to_graph


def _decomposed(program):
    if not isinstance(program, ExportedProgram):
        raise TypeError(f"esgraph.torch.load: expected a torch.export.ExportedProgram, got {type(program).__name__}")
    return program.run_decompositions(decompositions())


def load(program, *, name=None):
    """The Graph of an ExportedProgram, lowered to core ATen first: its parameters, buffers and
    constant tensors are constants, its user inputs the graph's inputs (named as in forward),
    its symbolic dims esgraph symbols. symbol_ranges(program) gives their ranges for compile."""
    program = _decomposed(program)
    label = name or "exported_program"
    constants, failures = {}, []
    for i, spec in enumerate(program.graph_signature.input_specs):
        if spec.kind == InputKind.PARAMETER:
            constants[i] = program.state_dict[spec.target]
        elif spec.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            constants[i] = program.state_dict[spec.target] if spec.target in program.state_dict else program.constants[spec.target]
        elif spec.kind != InputKind.USER_INPUT:
            failures.append((f"input {spec.arg.name}", f"a {spec.kind.name.lower()} input, which esgraph cannot hold"))
    outputs = [k for k, spec in enumerate(program.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
    mutated = [spec.target for spec in program.graph_signature.output_specs if spec.kind == OutputKind.BUFFER_MUTATION]
    if mutated:  # a buffer the forward writes (batch norm in training mode): a state esgraph's graph does not keep
        failures.append(("buffers", f"the program writes {', '.join(mutated)}; export the module in eval() mode"))
    written = [spec.target for spec in program.graph_signature.output_specs if spec.kind == OutputKind.USER_INPUT_MUTATION]
    if written:  # an input the forward writes in place: esgraph's inputs are read only
        failures.append(("inputs", f"the program writes its input(s) {', '.join(written)} in place"))
    if failures:
        raise ImportFailed(label, failures)
    graph, _ = to_graph(program.graph_module, label, constants, outputs=outputs)
    return graph


def symbol_ranges(program):
    """{symbol: (min, max)} of the program's symbolic dims whose range is bounded, for
    esgraph.compile(graph, shapes=...): one plan serves every size in the range."""
    if not isinstance(program, ExportedProgram):
        raise TypeError(f"esgraph.torch.symbol_ranges: expected a torch.export.ExportedProgram, got {type(program).__name__}")
    ranges = {}
    for symbol, r in program.range_constraints.items():
        lower, upper = r.lower, r.upper
        if upper.is_finite and lower.is_finite:
            ranges[str(symbol)] = (int(lower), int(upper))
    return ranges


def from_module(module, example_inputs, *, dynamic_shapes=None, name=None):
    """The Graph of `module(*example_inputs)`, through torch.export (in eval mode)."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_module: expected a torch.nn.Module, got {type(module).__name__}")
    example_inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        raise TypeError("from_module: example_inputs must be torch tensors, got "
                        + ", ".join(type(x).__name__ for x in example_inputs))
    label = name or type(module).__name__
    try:
        program = torch.export.export(module.eval(), example_inputs, dynamic_shapes=dynamic_shapes)
    except Exception as e:  # export's own refusal (data-dependent control flow, an untraceable call): one report
        first = (str(e).splitlines() or [""])[0]
        raise ImportFailed(label, [("module", f"torch.export cannot capture it: {type(e).__name__}: {first}")]) from e
    return load(program, name=label)
