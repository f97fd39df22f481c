"""A TF.js graph model (what tensorflowjs_converter writes): `model.json` holds the GraphDef in
protobuf's JSON form (`modelTopology`), a signature, and a manifest of the weights, which lie in
binary shard files beside it, group by group, each group's shards one buffer. A weight is a Const
node of the graph whose value the manifest gives: float32, int32 or bool, or quantized to uint8
or uint16 (value = code * scale + min) or to float16."""
import json
import os

import numpy as np
from google.protobuf import json_format

from .._C import FormatError
from . import _schema

_DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.bool_, "uint8": np.uint8, "uint16": np.uint16,
           "float16": np.float16, "int8": np.int8, "int16": np.int16, "int64": np.int64}


class TfjsModel:
    """`graph_def`, `weights` ({Const node name: array}), and the signature's `inputs` and
    `outputs` ([(key, tensor name)], sorted by key; empty when the model has no signature)."""

    def __init__(self, path):
        self.path = path
        folder = os.path.dirname(os.path.abspath(path))
        try:
            with open(path, "rb") as f:
                model = json.loads(f.read())
            if not isinstance(model, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError) as e:
            raise FormatError(f"`{path}` is not a TF.js model: {type(e).__name__}: {e}") from e
        if model.get("format") == "layers-model":
            raise FormatError(f"`{path}` is a TF.js Layers model (a Keras topology); esgraph reads TF.js graph models "
                              "(tensorflowjs_converter --output_format=tfjs_graph_model)")
        if not isinstance(model.get("modelTopology"), dict):
            raise FormatError(f"`{path}` is not a TF.js graph model: it has no modelTopology")
        try:
            self.graph_def = json_format.ParseDict(model["modelTopology"], _schema.GraphDef(), ignore_unknown_fields=True)
        except json_format.ParseError as e:
            raise FormatError(f"`{path}`: its modelTopology is not a GraphDef: {e}") from e
        try:
            signature = model.get("signature") or {}
            self.inputs = sorted((k, v["name"]) for k, v in (signature.get("inputs") or {}).items())
            self.outputs = sorted((k, v["name"]) for k, v in (signature.get("outputs") or {}).items())
        except (AttributeError, KeyError, TypeError) as e:
            raise FormatError(f"`{path}`: its signature: {type(e).__name__}: {e}") from e
        self.weights = {}
        try:
            for group in model.get("weightsManifest") or []:
                self._read_group(folder, group)
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise FormatError(f"`{path}`: its weights manifest: {type(e).__name__}: {e}") from e

    def _read_group(self, folder, group):
        data = b""
        for name in group["paths"]:
            shard = os.path.normpath(os.path.join(folder, name))
            if os.path.dirname(shard) != folder:  # the shards lie beside model.json, nowhere else
                raise ValueError(f"shard '{name}' is outside the model's folder")
            with open(shard, "rb") as f:
                data += f.read()
        at = 0
        for w in group["weights"]:
            shape = [int(d) for d in w["shape"]]
            if any(d < 0 for d in shape):
                raise ValueError(f"weight '{w['name']}' has shape {shape}")
            count = int(np.prod(shape, dtype=object)) if shape else 1
            quantization = w.get("quantization")
            stored = np.dtype(_DTYPES[quantization["dtype"] if quantization else w["dtype"]])
            size = count * stored.itemsize
            if at + size > len(data):
                raise ValueError(f"weight '{w['name']}' needs bytes {at}..{at + size} of its group's {len(data)}")
            codes = np.frombuffer(data, stored, count, at).reshape(shape)
            at += size
            self.weights[w["name"]] = _dequantized(codes, w, quantization)
        if at != len(data):
            raise ValueError(f"a group's weights take {at} bytes of its shards' {len(data)}")


def _dequantized(codes, weight, quantization):
    """A weight as the dtype the graph reads: affine codes scaled back, float16 widened."""
    target = np.dtype(_DTYPES[weight["dtype"]])
    if not quantization:
        return codes
    if quantization["dtype"] == "float16":
        values = codes.astype(target)
    elif "scale" in quantization:
        values = codes.astype(np.float32) * np.float32(quantization["scale"]) + np.float32(quantization["min"])
        # An integer weight is rounded as TF.js's Math.round does (half up), not truncated.
        values = (np.floor(values + 0.5) if target.kind in "iu" else values).astype(target)
    else:
        raise ValueError(f"weight '{weight['name']}': quantization {quantization} names no scale")
    values.setflags(write=False)
    return values
