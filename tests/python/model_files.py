"""Reading and rewriting compiled-model files (docs/model-format.md) for the tests: the header,
the section table and a section's bytes, and the checksums recomputed after a change, so that a
test can write a file whose damage only the loader's structural checks can find."""
import struct

import xxhash

HEADER = 64
ENTRY = 32
TARGET, OPTIONS, BLOBS, GRAPH, SYMBOLIC_PLAN, EXACT_PLAN = 1, 2, 3, 4, 5, 6


def _h(data):
    return xxhash.xxh3_64_intdigest(bytes(data))


class ModelFile:
    def __init__(self, data):
        self.data = bytearray(data)
        magic, self.version, count, self.size = struct.unpack_from("<8sIIQ", self.data, 0)
        assert magic == b"ESGMODEL"
        self.sections = []  # [kind, offset, size]
        for i in range(count):
            kind, _, off, size, _ = struct.unpack_from("<IIQQQ", self.data, HEADER + ENTRY * i)
            self.sections.append([kind, off, size])

    def section(self, kind):
        """The first section of `kind`: (index, bytes)."""
        for i, (k, off, size) in enumerate(self.sections):
            if k == kind:
                return i, bytes(self.data[off:off + size])
        raise KeyError(kind)

    def replace(self, index, payload):
        """Section `index` with new bytes, appended at the end of the file (64-byte aligned); its
        old bytes zeroed, as the loader wants every byte outside sections and constants."""
        _, off, size = self.sections[index]
        self.data[off:off + size] = b"\0" * size
        self.data.extend(b"\0" * (-len(self.data) % 64))
        self.sections[index][1:] = [len(self.data), len(payload)]
        self.data.extend(payload)

    def blobs(self):
        """The constants' table: [(offset, size, hash)]."""
        _, table = self.section(BLOBS)
        count, = struct.unpack_from("<Q", table, 0)
        return [struct.unpack_from("<QQQ", table, 8 + 24 * i) for i in range(count)]

    def set_blobs(self, entries):
        index, _ = self.section(BLOBS)
        table = struct.pack("<Q", len(entries)) + b"".join(struct.pack("<QQQ", *e) for e in entries)
        self.replace(index, table)

    def bytes(self):
        """The file with its table, header and checksums written again."""
        out = self.data
        table = b""
        for kind, off, size in self.sections:
            table += struct.pack("<IIQQQ", kind, 0, off, size, _h(out[off:off + size]))
        out[HEADER:HEADER + len(table)] = table
        struct.pack_into("<8sIIQQ", out, 0, b"ESGMODEL", self.version, len(self.sections), len(out), _h(table))
        struct.pack_into("<Q", out, 32, _h(out[:32]))
        return bytes(out)


def string(s):
    raw = s.encode()
    return struct.pack("<I", len(raw)) + raw


def read_strings(data, count):
    out, at = [], 0
    for _ in range(count):
        n, = struct.unpack_from("<I", data, at)
        out.append(data[at + 4:at + 4 + n].decode())
        at += 4 + n
    return out
