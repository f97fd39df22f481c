"""relu(x·2 - 1) through an installed esgraph package, from outside the source tree."""
import os
import sys

import numpy as np

import esgraph
from esgraph import ops

source = os.environ["ESG_SOURCE_DIR"]
if os.path.realpath(esgraph.__file__).startswith(os.path.realpath(source) + os.sep):
    sys.exit(f"esgraph was imported from the source tree: {esgraph.__file__}")
with esgraph.GraphBuilder("consumer_py") as b:
    x = b.input("x", esgraph.f32, [4])
    y = ops.relu(x * 2.0 - 1.0)
got = esgraph.compile(b.build([y]))(np.array([-1, 0, 1, 2], np.float32))
np.testing.assert_array_equal(got, np.array([0, 0, 1, 3], np.float32))
print(f"consumer (Python, {sys.argv[1]}): ok, esgraph {esgraph.__version__} from {os.path.dirname(esgraph.__file__)}")
