"""What the model importers (esgraph.onnx, esgraph.torch) share: the one error they raise."""
from . import _C


class ImportFailed(_C.Error, ValueError):
    """A model esgraph cannot import; `failures` lists (node description, reason), every
    unsupported node at once rather than the first one."""

    def __init__(self, model_name, failures, needed_constants=()):
        self.failures = list(failures)
        # Values whose contents had to be known while importing (shape operands computed at
        # run time); for ONNX, graph inputs among them can be given with load(constants=...).
        self.needed_constants = sorted(needed_constants)
        lines = [f"cannot import model '{model_name}': {len(self.failures)} unsupported node(s)"]
        lines += [f"  {where}: {why}" for where, why in self.failures]
        super().__init__("\n".join(lines))
