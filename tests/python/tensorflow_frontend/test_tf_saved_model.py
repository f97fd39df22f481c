"""SavedModel directories: the serving signature's graph, its variables bound through the
object graph, against TensorFlow's own tf.saved_model.load; and what a broken one says."""
import shutil

import numpy as np
import pytest

import esgraph
from tf_models import rand, saved, serving_reference, tf

keras = pytest.importorskip("keras")


def _close(got, want):
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4 * (float(np.max(np.abs(w))) or 1.0))


class _Two(tf.Module):
    """Two outputs, keyed out of order, and a variable of its own beside a Keras model's."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.offset = tf.Variable(rand(5, seed=9))

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="image")])
    def serve(self, image):
        y = self.model(image, training=False)
        return {"z_logits": y + self.offset, "a_probabilities": tf.nn.softmax(y)}


def _small_cnn():
    return keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, activation="relu"),
                             keras.layers.BatchNormalization(), keras.layers.Flatten(), keras.layers.Dense(5)])


def test_saved_module_with_two_outputs(tmp_path):
    path = saved(_Two(_small_cnn()), tmp_path / "m")
    graph = esgraph.tensorflow.load(path)
    model = esgraph.compile(graph)
    assert model.output_names == ["a_probabilities", "z_logits"]  # a signature's structure, by key
    for batch in (1, 3):
        x = rand(batch, 8, 8, 3)
        _close(model(x), serving_reference(path, x))


@pytest.mark.parametrize("name", ["MobileNetV2", "ResNet50"])
def test_keras_export_of_an_application(name, tmp_path):
    model = getattr(keras.applications, name)(weights=None, input_shape=(64, 64, 3), classifier_activation=None)
    path = saved(model, tmp_path / name, keras_export=True)
    x = rand(2, 64, 64, 3)
    _close(esgraph.compile(esgraph.tensorflow.load(path))(x), serving_reference(path, x))


def test_tf_keras_model_saved(tmp_path):
    tf_keras = pytest.importorskip("tf_keras")
    model = tf_keras.applications.MobileNet(weights=None, input_shape=(64, 64, 3), alpha=0.5, classifier_activation=None)
    path = tmp_path / "mobilenet"
    tf.saved_model.save(model, str(path))
    x = rand(1, 64, 64, 3)
    _close(esgraph.compile(esgraph.tensorflow.load(path))(x), serving_reference(path, x))


def test_signatures_by_name(tmp_path):
    path = saved(_Two(_small_cnn()), tmp_path / "m")
    with pytest.raises(esgraph.FormatError, match="no signature 'nope' \\(its signatures: serving_default\\)"):
        esgraph.tensorflow.load(path, signature="nope")
    with pytest.raises(TypeError, match="a SavedModel's are its signature's"):
        esgraph.tensorflow.load(path, outputs=["x"])


def test_broken_saved_models_are_named(tmp_path):
    path = saved(_Two(_small_cnn()), tmp_path / "m")
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    index = broken / "variables" / "variables.index"
    data = index.read_bytes()
    index.write_bytes(data[:-5])  # the footer's magic number cut
    with pytest.raises(esgraph.FormatError, match="variables` cannot be read: ValueError: the table's magic number is missing"):
        esgraph.tensorflow.load(broken)
    index.write_bytes(data)
    shard = next((broken / "variables").glob("variables.data-*"))
    shard.write_bytes(shard.read_bytes()[:100])  # the values cut short
    with pytest.raises(esgraph.FormatError, match="which has 100 bytes"):
        esgraph.tensorflow.load(broken)
    shutil.rmtree(broken / "variables")
    with pytest.raises(esgraph.FormatError, match="variables` cannot be read"):
        esgraph.tensorflow.load(broken)
    (broken / "saved_model.pb").write_bytes(b"\xff\xff not a SavedModel")
    with pytest.raises(esgraph.FormatError, match="not a SavedModel|no MetaGraphDef tagged"):
        esgraph.tensorflow.load(broken)


def _table(blocks, index_entries):
    """A LevelDB-format table of uncompressed `blocks` (lists of (key, value)) and an index
    whose entries name blocks by number, as TF's TensorBundle index is written."""
    from esgraph.onnx._wire import encode_varint as v
    import struct

    def block(entries):
        body = b"".join(v(0) + v(len(k)) + v(len(x)) + k + x for k, x in entries)
        return body + struct.pack("<II", 0, 1)
    data, handles = b"", []
    for entries in blocks:
        raw = block(entries)
        handles.append((len(data), len(raw)))
        data += raw + b"\x00" + b"\x00" * 4  # compression type none, a checksum
    index = block([(b"k%d" % i, v(handles[b][0]) + v(handles[b][1])) for i, b in enumerate(index_entries)])
    index_handle = (len(data), len(index))
    data += index + b"\x00" * 5
    footer = v(0) + v(0) + v(index_handle[0]) + v(index_handle[1])
    return data + footer + b"\x00" * (40 - len(footer)) + struct.pack("<Q", 0xDB4775248B80FB57)


def test_the_index_table_reader_bounds_its_work_and_names_bad_entries(tmp_path):
    from esgraph.tensorflow._bundle import Bundle
    from esgraph.tensorflow._table import read_table
    assert read_table(_table([[(b"", b""), (b"a", b"1")]], [0])) == [(b"", b""), (b"a", b"1")]
    with pytest.raises(ValueError, match="two index entries name the block"):
        read_table(_table([[(b"a", b"1")]], [0, 0, 0]))
    (tmp_path / "v.index").write_bytes(_table([[(b"", b"\xff\xff\xff")]], [0]))
    with pytest.raises(ValueError, match="the header is not a protobuf message"):
        Bundle(str(tmp_path / "v"))
