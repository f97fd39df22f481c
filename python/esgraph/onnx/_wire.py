"""Protobuf's wire format, read directly: for what must be known of an ONNX file without
parsing all of it (how deep it nests bodies; where its weights lie)."""
from typing import NamedTuple

from .._varint import varint


class Field(NamedTuple):
    number: int
    wire: int   # 0 varint, 1 fixed 64-bit, 2 length-delimited, 5 fixed 32-bit
    key: int    # where the field's key begins
    begin: int  # where its value begins (after the length, for wire type 2)
    end: int    # one past its value


def fields(data, begin, end):
    """Every field of the message in data[begin:end], in order; ValueError for a field that
    runs past `end` or a wire type ONNX does not use (groups)."""
    at = begin
    while at < end:
        key_at = at
        key, at = varint(data, at)
        wire = key & 7
        if wire == 0:
            _, value_end = varint(data, at)
        elif wire == 1:
            value_end = at + 8
        elif wire == 5:
            value_end = at + 4
        elif wire == 2:
            size, at = varint(data, at)
            value_end = at + size
        else:
            raise ValueError(f"wire type {wire}")
        if value_end > end:
            raise ValueError("a field runs past its message")
        yield Field(key >> 3, wire, key_at, at, value_end)
        at = value_end


def encode_varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def length_delimited(number, payload):
    """Field `number` holding `payload` (bytes)."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload
