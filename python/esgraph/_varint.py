"""Base-128 varints, as protobuf's wire format and LevelDB's tables write them: what the
importers read of a file directly, without a parser (onnx/_wire.py, tensorflow/_table.py)."""


def varint(data, at, end=None):
    """The varint at data[at] and the position after it; ValueError when it runs past `end`
    (the data's end by default)."""
    end = len(data) if end is None else end
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise ValueError("truncated")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at
