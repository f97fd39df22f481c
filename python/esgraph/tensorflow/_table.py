"""The sorted string table a TensorBundle's index is (LevelDB's table format, which TF's
`table_builder` writes): a footer naming the index block, whose entries name the data blocks,
whose entries are the keys and values. Blocks are uncompressed, as TF writes them; a file that
says otherwise, or whose handles point outside it, is a ValueError."""
import struct

from .._varint import varint

_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48


def _handle(data, at, end):
    offset, at = varint(data, at, end)
    size, at = varint(data, at, end)
    return (offset, size), at


def _block(data, handle):
    """The (key, value) entries of the block at `handle`, keys rebuilt from their shared prefixes."""
    offset, size = handle
    if offset + size + 5 > len(data):
        raise ValueError(f"a block at {offset} of {size} bytes runs past the file's {len(data)}")
    if data[offset + size] != 0:
        raise ValueError(f"a block is compressed (type {data[offset + size]}); TF writes them uncompressed")
    end = offset + size
    if size < 4:
        raise ValueError("a block too short for its restart count")
    restarts = struct.unpack_from("<I", data, end - 4)[0]
    limit = end - 4 - 4 * restarts
    if limit < offset:
        raise ValueError("a block's restart array runs past its start")
    at, key, entries = offset, b"", []
    while at < limit:
        shared, at = varint(data, at, limit)
        unshared, at = varint(data, at, limit)
        length, at = varint(data, at, limit)
        if shared > len(key) or at + unshared + length > limit:
            raise ValueError("a block entry runs past its block")
        key = key[:shared] + bytes(data[at:at + unshared])
        at += unshared
        entries.append((key, bytes(data[at:at + length])))
        at += length
    return entries


def read_table(data):
    """Every (key, value) of the table in `data`, in order."""
    if len(data) < _FOOTER:
        raise ValueError(f"{len(data)} bytes are too few for a table's footer")
    footer = len(data) - _FOOTER
    if struct.unpack_from("<Q", data, len(data) - 8)[0] != _MAGIC:
        raise ValueError("the table's magic number is missing")
    _, at = _handle(data, footer, len(data) - 8)  # the meta-index, which TF leaves empty
    index, _ = _handle(data, at, len(data) - 8)
    entries, seen = [], set()
    for _, value in _block(data, index):
        handle, _ = _handle(value, 0, len(value))
        if handle in seen:  # each data block once: the work is bounded by the file
            raise ValueError(f"two index entries name the block at {handle[0]}")
        seen.add(handle)
        entries.extend(_block(data, handle))
    return entries
