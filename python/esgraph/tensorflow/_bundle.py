"""A TensorBundle, the checkpoint format of a SavedModel's variables/: an index table
(`<prefix>.index`, _table.py) of a header and one BundleEntryProto per key, naming a data
shard (`<prefix>.data-<k>-of-<n>`), an offset and a size. Each tensor is read straight from
its shard into an array of its own."""
import os

import numpy as np

from .._varint import varint
from . import _schema, _tensors
from ._table import read_table

_STRING = 7


class Bundle:
    """The tensors of the bundle at `prefix` by key. ValueError for an index or entry that does
    not hold together (a shard or a range that is not there, a size that does not fit the shape)."""

    def __init__(self, prefix):
        self.prefix = prefix
        with open(prefix + ".index", "rb") as f:
            table = read_table(f.read())
        if not table or table[0][0] != b"":
            raise ValueError("the index has no header entry")
        header = _schema.BundleHeaderProto()
        _parse(header, table[0][1], "the header")
        if header.endianness != 0:
            raise ValueError("the bundle is big-endian")
        self.num_shards = header.num_shards
        self.entries = {}
        for key, value in table[1:]:
            entry = _schema.BundleEntryProto()
            _parse(entry, value, f"entry '{key.decode('utf-8', 'replace')}'")
            self.entries[key.decode("utf-8", "replace")] = entry

    def _bytes(self, key):
        entry = self.entries[key]
        if entry.slices:
            raise ValueError(f"variable '{key}' is saved in slices (a partitioned variable)")
        if not 0 <= entry.shard_id < max(self.num_shards, 1):
            raise ValueError(f"variable '{key}' names shard {entry.shard_id} of {self.num_shards}")
        path = f"{self.prefix}.data-{entry.shard_id:05d}-of-{self.num_shards:05d}"
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if entry.offset < 0 or entry.size < 0 or entry.offset + entry.size > size:
                raise ValueError(f"variable '{key}' lies at {entry.offset}..{entry.offset + entry.size} of "
                                 f"{os.path.basename(path)}, which has {size} bytes")
            f.seek(entry.offset)
            return entry, f.read(entry.size)

    def array(self, key):
        """The tensor `key` as a read-only array (bfloat16 as its bits)."""
        entry, data = self._bytes(key)
        dims = _tensors.tensor_dims(entry.shape) or []
        dtype = _tensors.numpy_dtype(entry.dtype)
        count = int(np.prod(dims, dtype=object)) if dims else 1
        if len(data) != count * dtype.itemsize:
            raise ValueError(f"variable '{key}': {len(data)} bytes do not hold {dims} {_tensors.type_name(entry.dtype)} elements")
        array = np.frombuffer(data, dtype).reshape(dims)
        return array

    def string(self, key):
        """A scalar string tensor: its length (a varint), a checksum of the lengths, its bytes."""
        entry, data = self._bytes(key)
        if entry.dtype != _STRING or _tensors.tensor_dims(entry.shape):
            raise ValueError(f"'{key}' is not a scalar string")
        try:
            length, at = varint(data, 0)
        except ValueError:
            raise ValueError(f"'{key}': its length runs past its data") from None
        at += 4  # the masked CRC32C of the lengths
        if at + length != len(data):
            raise ValueError(f"'{key}': a string of {length} bytes in {len(data) - at}")
        return data[at:]


def _parse(message, data, what):
    try:
        message.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError
        raise ValueError(f"{what} is not a protobuf message: {e}") from e
