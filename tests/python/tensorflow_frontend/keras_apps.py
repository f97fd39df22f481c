"""The Keras applications the TensorFlow frontend is checked and measured on, with random
weights (no download), and how they are saved: one table for the tests (test_tf_models.py), the
TF.js check (check_tfjs_keras_apps.py) and the benchmark (bench/tf_models.py). Imports neither
esgraph nor pytest, so that TF.js's converter environment can build them too."""
import os

APPS = ["ResNet50", "MobileNetV2", "MobileNetV3Small", "EfficientNetB0", "DenseNet121", "InceptionV3", "Xception",
        "ConvNeXtTiny", "tf_keras.MobileNetV2", "tf_keras.ResNet50"]
# The smallest input each takes (Inception and Xception shrink too far below 75).
SMALLEST = {"InceptionV3": 75, "Xception": 75}


def make(name, size):
    """The application with random weights, its classifier's softmax left out."""
    if name.startswith("tf_keras."):
        import tf_keras
        return getattr(tf_keras.applications, name.split(".")[1])(weights=None, input_shape=(size, size, 3),
                                                                   classifier_activation=None)
    import keras
    extra = {"include_preprocessing": False} if name.startswith(("MobileNetV3", "ConvNeXt")) else {}
    return getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classifier_activation=None, **extra)


def save(model, name, folder):
    """The model as a SavedModel in folder/name: Keras 3's export, or tf.saved_model.save for a
    tf-keras (Keras 2) model."""
    import tensorflow as tf
    path = os.path.join(folder, name)
    if name.startswith("tf_keras."):
        tf.saved_model.save(model, path)
    else:
        model.export(path, verbose=False)
    return path
