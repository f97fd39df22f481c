"""How the importer holds TF's NHWC values: a 4-D value a convolution made stays in esgraph's
NCHW order (an `Nchw`) through the ops that do not read the order of axes."""

# NHWC axis -> NCHW axis, and the permutations between the two orders.
TO_NCHW_AXIS = [0, 2, 3, 1]
NHWC_TO_NCHW, NCHW_TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


class Nchw:
    """A 4-D TF value (NHWC) held as its NCHW transpose: esgraph's convolutions' order."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor
