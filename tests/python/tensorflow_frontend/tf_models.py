"""Helpers of the TensorFlow frontend's tests: graphs made by TensorFlow itself (frozen with its
own convert_variables_to_constants_v2), run by TensorFlow as the reference."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

tf = pytest.importorskip("tensorflow")
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

import esgraph  # noqa: E402
import esgraph.tensorflow  # noqa: E402,F401


class Frozen:
    """A tf.function frozen for the given input specs: `graph_def` (a tf GraphDef), `data` (its
    bytes) and `reference(*arrays)` (TensorFlow's outputs). `remapped`: the graph as grappler's
    remapper optimizes it (what tf_optimizer writes: _FusedConv2D, _FusedMatMul, ...);
    `lower_control_flow` False keeps TF2's functional If and While (True, TF's default, lowers
    them to v1's Switch, Merge, Enter, Exit, NextIteration and LoopCond)."""

    def __init__(self, fn, *specs, remapped=False, lower_control_flow=True):
        concrete = tf.function(fn).get_concrete_function(*specs)
        frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower_control_flow)
        self.graph_def = frozen.graph.as_graph_def()
        if remapped:
            self.graph_def = _remapped(self.graph_def, [o.name.split(":")[0] for o in frozen.outputs])
        self.data = self.graph_def.SerializeToString()
        # A GraphDef keeps no argument order: the tests name the inputs and outputs.
        self.input_names = [t.name.split(":")[0] for t in frozen.inputs]
        self.output_names = [t.name for t in frozen.outputs]
        self._frozen = frozen

    def reference(self, *arrays):
        out = self._frozen(*[tf.constant(a) for a in arrays])
        return [o.numpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


def _remapped(graph_def, outputs):
    """The graph optimized by grappler with its remapper on, as on a CPU (the remapper fuses
    only ops placed on a device)."""
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
    from tensorflow.python.grappler import tf_optimizer
    placed = tf.compat.v1.GraphDef()
    placed.CopyFrom(graph_def)
    for node in placed.node:
        node.device = "/device:CPU:0"
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(placed, name="")
    meta = tf.compat.v1.train.export_meta_graph(graph_def=placed, graph=graph)
    meta.collection_def["train_op"].node_list.value.extend(outputs)  # what grappler must keep
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.optimizers.extend(["constfold", "arithmetic", "dependency", "remap"])
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    return tf_optimizer.OptimizeGraph(config, meta)


def spec(*shape, dtype="float32"):
    return tf.TensorSpec(list(shape), getattr(tf, dtype))


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def run(frozen, *arrays, **load_kwargs):
    """esgraph's outputs for the frozen graph, as a list, in the function's order of outputs."""
    load_kwargs.setdefault("outputs", frozen.output_names)
    model = esgraph.compile(esgraph.tensorflow.load(frozen.data, **load_kwargs))
    return list(model.run(dict(zip(frozen.input_names, arrays))))


def assert_matches_tensorflow(frozen, *arrays, tolerance=1e-4, **load_kwargs):
    """esgraph's outputs equal TensorFlow's to `tolerance` of each output's largest magnitude."""
    got, want = run(frozen, *arrays, **load_kwargs), frozen.reference(*arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        scale = (float(np.max(np.abs(w))) or 1.0) if w.size and w.dtype.kind == "f" else 1.0
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=0, atol=tolerance * scale)
        else:
            np.testing.assert_array_equal(g, w)


def saved(model_or_module, path, keras_export=False):
    """`model_or_module` written as a SavedModel at `path`: by Keras's own export, or by
    tf.saved_model.save (a tf.Module with a `serve` signature, or a tf-keras model)."""
    if keras_export:
        model_or_module.export(str(path), verbose=False)
    elif hasattr(model_or_module, "serve"):
        tf.saved_model.save(model_or_module, str(path), signatures={"serving_default": model_or_module.serve})
    else:  # a tf-keras model: its call is the serving signature
        tf.saved_model.save(model_or_module, str(path))
    return path


def serving_reference(path, *arrays, **named):
    """TensorFlow's outputs of the SavedModel's serving signature, sorted by output key; the
    inputs by position, or by name."""
    signature = tf.saved_model.load(str(path)).signatures["serving_default"]
    outputs = signature(*[tf.constant(a) for a in arrays], **{k: tf.constant(v) for k, v in named.items()})
    return [outputs[k].numpy() for k in sorted(outputs)]
