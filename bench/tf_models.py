"""Keras applications (random weights, no download) saved as SavedModels, run by esgraph
(esgraph.tensorflow.load) and by TensorFlow's own CPU runtime (the serving signature of
tf.saved_model.load) side by side, each on `--threads` threads: TF's intra-op pool gets them,
its inter-op pool one. XLA off, and beside it the same Keras model (the same weights) under
tf.function(jit_compile=True), which the loaded signature itself refuses.
The sides alternate `--rounds` rounds, each warmed up by 3 runs a round and keeping its best
round's median of `--runs` (bench/timing.py). Outputs are checked against TF's first.

    PYTHONPATH=build/default/python:bench .venv/bin/python bench/tf_models.py [--runs 9] [--rounds 3]
        [--batches 1,8] [--models ResNet50,MobileNetV2] [--size 224] [--no-xla]
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import esgraph  # noqa: E402
import esgraph.tensorflow  # noqa: E402

import peers  # noqa: E402  bench/peers.py
from timing import side_by_side  # noqa: E402  bench/timing.py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python", "tensorflow_frontend"))
from keras_apps import APPS, make, save  # noqa: E402  the applications the tests check

MODELS = APPS + ["encoder", "detector"]
SEQUENCE = 128  # the encoder's tokens per sequence


def encoder(vocab=30522, hidden=256, heads=4, layers=4):
    """A BERT-style encoder (Keras ships none): embeddings, MultiHeadAttention with a padding
    mask, LayerNormalization and a GELU feed-forward; the first token's state projected."""
    import keras
    tokens = keras.Input((SEQUENCE,), dtype="int32", name="tokens")
    mask = keras.Input((SEQUENCE,), dtype="float32", name="mask")
    x = keras.layers.Embedding(vocab, hidden)(tokens) + keras.layers.Embedding(SEQUENCE, hidden)(keras.ops.arange(SEQUENCE))
    attention_mask = keras.ops.cast(mask[:, None, :] * mask[:, :, None], "bool")
    for _ in range(layers):
        a = keras.layers.MultiHeadAttention(heads, hidden // heads)(x, x, attention_mask=attention_mask)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + a)
        f = keras.layers.Dense(hidden)(keras.layers.Dense(4 * hidden, activation="gelu")(x))
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + f)
    return keras.Model([tokens, mask], keras.layers.Dense(2)(x[:, 0]))


class Detector(tf.Module):
    """A detection-style model (Keras ships none): MobileNetV2's features, a box head and a
    score head per cell and anchor (9 anchors on the 7 x 7 map at 224), the top 256 candidates
    of the batch by score, non-maximum suppression to 32 (TF's NonMaxSuppressionV5), and the
    kept boxes and scores gathered: the sizes NMS keeps are known only when it has run."""

    ANCHORS = 9

    def __init__(self, size):
        super().__init__()
        import keras
        self.size = size
        self.backbone = keras.applications.MobileNetV2(weights=None, input_shape=(size, size, 3), include_top=False)
        rng = np.random.default_rng(0)
        channels = self.backbone.output_shape[-1]
        self.boxes = tf.Variable(rng.standard_normal((1, 1, channels, 4 * self.ANCHORS)).astype(np.float32) * 0.05)
        self.scores = tf.Variable(rng.standard_normal((1, 1, channels, self.ANCHORS)).astype(np.float32) * 0.05)
        self.serve = tf.function(self.detect, input_signature=[tf.TensorSpec([None, size, size, 3], tf.float32, name="image")])

    def detect(self, image):
        features = self.backbone(image, training=False)
        centers = tf.sigmoid(tf.reshape(tf.nn.conv2d(features, self.boxes, 1, "SAME"), [-1, 4]))
        boxes = tf.concat([centers[:, :2] - 0.1 * centers[:, 2:], centers[:, :2] + 0.1 * centers[:, 2:]], axis=1)
        scores = tf.sigmoid(tf.reshape(tf.nn.conv2d(features, self.scores, 1, "SAME"), [-1]))
        scores, order = tf.math.top_k(scores, k=256)
        boxes = tf.gather(boxes, order)
        keep, kept = tf.image.non_max_suppression_with_scores(boxes, scores, 32, iou_threshold=0.5, score_threshold=0.3)
        return {"boxes": tf.gather(boxes, keep), "scores": kept}


def save_detector(module, folder):
    path = os.path.join(folder, "detector")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    return path


def inputs_for(name, batch, size):
    """The model's inputs, by signature key."""
    rng = np.random.default_rng(0)
    if name == "encoder":
        mask = np.ones((batch, SEQUENCE), np.float32)
        mask[:, SEQUENCE - 16:] = 0
        return {"tokens": rng.integers(0, 30522, (batch, SEQUENCE)).astype(np.int32), "mask": mask}
    return {None: rng.standard_normal((batch, size, size, 3)).astype(np.float32)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--no-xla", action="store_true")
    args = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    print(f"tensorflow {tf.__version__}, esgraph on {args.threads} thread(s), TF intra-op {args.threads}, inter-op 1; "
          f"input {args.size}x{args.size}")
    print(f"{'model':22} {'batch':>5} {'esgraph ms':>11} {'TF ms':>9} {'ratio':>6} {'TF+XLA ms':>10} {'ratio':>6} {'max err':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            if name == "detector":
                module = Detector(args.size)
                path = save_detector(module, folder)
                xla = None if args.no_xla else tf.function(module.detect, jit_compile=True)
            else:
                keras_model = encoder() if name == "encoder" else make(name, args.size)
                path = save(keras_model, name, folder)
                xla = None if args.no_xla else tf.function(lambda x, m=keras_model: m(x, training=False), jit_compile=True)
            signature = tf.saved_model.load(path).signatures["serving_default"]
            model = esgraph.compile(esgraph.tensorflow.load(path), threads=args.threads)
            for batch in (int(b) for b in args.batches.split(",")):
                arrays = inputs_for(name, batch, args.size)
                if None in arrays:  # one image input, whatever the signature calls it
                    (key,) = model.input_names
                    arrays = {key: arrays[None]}
                feed = {k: tf.constant(v) for k, v in arrays.items()}
                ordered = [arrays[k] for k in model.input_names]
                # The first output (the detector's: its boxes, which NMS keeps in the same order on both sides).
                outputs = signature(**feed)
                want = (outputs[model.output_names[0]] if model.output_names[0] in outputs else next(iter(outputs.values()))).numpy()
                got = model(*ordered)
                got = got[0] if isinstance(got, tuple) else got
                err = float(np.max(np.abs(got - want)) / np.max(np.abs(want))) if got.shape == want.shape else float("inf")
                sides = {"esgraph": lambda: model(*ordered), "TF": lambda: signature(**feed)}
                if xla is not None:
                    keras_input = [feed["tokens"], feed["mask"]] if name == "encoder" else next(iter(feed.values()))
                    try:
                        xla(keras_input)
                        sides["XLA"] = lambda: xla(keras_input)
                    except Exception as e:  # what XLA cannot compile is reported, not measured
                        print(f"  {name}: XLA refused it: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
                ms = side_by_side(sides, rounds=args.rounds, runs=args.runs)
                x_ms = ms.get("XLA")
                print(f"{name:22} {batch:5d} {ms['esgraph']:11.2f} {ms['TF']:9.2f} {ms['esgraph'] / ms['TF']:6.2f} "
                      + (f"{x_ms:10.2f} {ms['esgraph'] / x_ms:6.2f}" if x_ms else f"{'-':>10} {'-':>6}") + f" {err:8.1e}",
                      flush=True)


if __name__ == "__main__":
    main()
