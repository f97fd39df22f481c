"""The ten Keras applications (keras_apps.py) as TF.js graph models, against TensorFlow running
the SavedModel each was converted from. TF.js's converter pins its own TensorFlow, so this runs
in two environments, as make_tfjs_fixtures.py does, and its models are too large to commit: a
check run by hand, its figures kept in docs/tensorflow.md.

    # 1. in the converter's environment (make_tfjs_fixtures.py says how to make it):
    /tmp/tfjs/bin/python tests/python/tensorflow_frontend/check_tfjs_keras_apps.py convert /tmp/tfjs_apps
    # 2. in the project's:
    PYTHONPATH=build/default/python .venv/bin/python tests/python/tensorflow_frontend/check_tfjs_keras_apps.py check /tmp/tfjs_apps

`convert` writes folder/<app>/saved (the SavedModel) and folder/<app>/<form> for the forms
float32 and uint8 (weights quantized to 8 bits). `check` loads each form with
esgraph.tensorflow.load, runs it and TensorFlow's serving signature of the SavedModel on the
same batch of 2, and prints the largest difference relative to the output's largest magnitude.
float32 must be within 1e-4. The uint8 figure is reported, not bounded: its weights lost what
8 bits cannot hold, and how far that moves a deep model's output is the model's own matter
(test_tf_tfjs.py bounds the dequantization itself, tensor by tensor)."""
import argparse
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_apps import APPS, SMALLEST, make, save  # noqa: E402

FORMS = {"float32": [], "uint8": ["--quantize_uint8", "*"]}


def convert(folder):
    import keras
    converter = os.path.join(os.path.dirname(sys.executable), "tensorflowjs_converter")
    for name in APPS:
        if os.path.isdir(os.path.join(folder, name, "saved")):
            continue  # converted before
        keras.utils.set_random_seed(0)
        path = save(make(name, SMALLEST.get(name, 64)), name, os.path.join(folder, name))
        os.rename(path, os.path.join(folder, name, "saved"))
        for form, flags in FORMS.items():
            # The converter refuses a model whose ops TF.js lacks, naming them on its last line.
            run = subprocess.run([converter, "--input_format=tf_saved_model", "--output_format=tfjs_graph_model", *flags,
                                  os.path.join(folder, name, "saved"), os.path.join(folder, name, form)],
                                 capture_output=True, text=True)
            if run.returncode:
                with open(os.path.join(folder, name, "refused.txt"), "w") as f:
                    f.write(" ".join(run.stderr.strip().splitlines()[-2:]))
                break
        print(f"{name}: {'refused by the converter' if run.returncode else 'converted'}", flush=True)


def check(folder):
    import numpy as np
    import tensorflow as tf

    import esgraph
    import esgraph.tensorflow
    failed = []
    print("| application | form | ops refused | largest difference / largest output |")
    print("|---|---|---|---:|")
    for name in APPS:
        size = SMALLEST.get(name, 64)
        x = np.random.default_rng(1).standard_normal((2, size, size, 3)).astype(np.float32)
        signature = tf.saved_model.load(os.path.join(folder, name, "saved")).signatures["serving_default"]
        (want,) = [v.numpy() for v in signature(tf.constant(x)).values()]
        refused = os.path.join(folder, name, "refused.txt")
        if os.path.exists(refused):
            with open(refused) as f:
                print(f"| {name} | - | TF.js's converter refuses it: {f.read().strip()} | |")
            continue
        for form in FORMS:
            try:
                got = esgraph.compile(esgraph.tensorflow.load(os.path.join(folder, name, form, "model.json")))(x)
            except esgraph.Error as e:
                failed.append((name, form))
                print(f"| {name} | {form} | {str(e).splitlines()[0]} | |")
                continue
            error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            if form == "float32" and error > 1e-4:
                failed.append((name, form))
            print(f"| {name} | {form} | none | {error:.1e} |", flush=True)
    if failed:
        raise SystemExit(f"failed: {failed}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["convert", "check"])
    ap.add_argument("folder")
    args = ap.parse_args()
    (convert if args.step == "convert" else check)(args.folder)


if __name__ == "__main__":
    main()
