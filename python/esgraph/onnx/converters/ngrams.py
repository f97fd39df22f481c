"""TfIdfVectorizer over integer tokens: the counts of a pool of n-grams in each row, each n-gram
read with gaps of up to `max_skip_count` tokens between its items (a 1-gram once), as ONNX
defines it, written over esgraph's ops for a row length known at import: each (length, gap)
pattern gathers the windows, compares them with the pool's n-grams of that length, and counts
the matches; one product with a constant 0/1 matrix puts each pool n-gram's count at its output
index. String pools are refused by name."""
import numpy as np

from ... import _C
from .nn import _static
from .registry import Unsupported, check_attrs, converts

ops = _C.ops

_MODES = ("TF", "IDF", "TFIDF")


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _pool_ngrams(pool, starts):
    """The pool's n-grams by length: {n: [count, n] array}, from ngram_counts' start indexes."""
    bounds = list(starts) + [len(pool)]
    grams = {}
    for n in range(1, len(starts) + 1):
        begin, end = bounds[n - 1], bounds[n]
        if begin > end or (end - begin) % n:
            raise Unsupported(f"ngram_counts {list(starts)}: the {n}-grams' span [{begin}, {end}) of the pool is no whole count of them")
        grams[n] = np.asarray(pool[begin:end], np.int64).reshape(-1, n)
    return grams


@converts("TfIdfVectorizer")
def tfidf_vectorizer(n):
    check_attrs(n, ("max_gram_length", "min_gram_length", "max_skip_count", "mode", "ngram_counts", "ngram_indexes",
                    "pool_int64s", "pool_strings", "weights"))
    if "pool_strings" in n.attrs:
        raise Unsupported("pool_strings: string tensors are not supported (integer pools only)")
    mode = _text(n.attr("mode"))
    if mode not in _MODES:
        raise Unsupported(f"mode '{mode}' (ONNX defines {', '.join(_MODES)})")
    low, high, skips = n.attr("min_gram_length"), n.attr("max_gram_length"), n.attr("max_skip_count")
    if not 1 <= low <= high or skips < 0:
        raise Unsupported(f"gram lengths {low} to {high} and max_skip_count {skips}")
    grams = _pool_ngrams(list(n.attr("pool_int64s", [])), list(n.attr("ngram_counts")))
    indexes = np.asarray(n.attr("ngram_indexes"), np.int64)
    total = sum(len(g) for g in grams.values())
    if len(indexes) != total or (indexes < 0).any():
        raise Unsupported(f"ngram_indexes holds {len(indexes)} entries for the pool's {total} n-grams (each at least 0)")
    weights = np.asarray(n.attr("weights", np.ones(total)), np.float32)
    if len(weights) != total:
        raise Unsupported(f"weights holds {len(weights)} entries for the pool's {total} n-grams")
    x = n.x(0)
    if x.ndim not in (1, 2):
        raise Unsupported(f"an input of rank {x.ndim} (ONNX takes [C] or [N, C])")
    rows = ops.unsqueeze(x, axes=[0]) if x.ndim == 1 else x
    length = _static([rows.shape[1]], "TfIdfVectorizer's row length")[0]
    width = int(indexes.max()) + 1 if total else 0
    # Which output index each pool n-gram counts for (pool order: by length, then as listed).
    placed = np.zeros((total, width), np.float32)
    placed[np.arange(total), indexes] = 1.0
    counts, first = [], 0
    for size in sorted(grams):
        pool = grams[size]
        if low <= size <= high and len(pool):
            found = None
            for skip in range(skips + 1 if size > 1 else 1):  # a 1-gram is one token: counted once
                step = skip + 1
                windows = length - (size - 1) * step
                if windows <= 0:
                    continue
                at = np.arange(windows)[:, None] + np.arange(size)[None, :] * step  # [windows, size]
                taken = ops.cast(ops.gather(rows, at, axis=1), _C.i64)  # [N, windows, size]
                same = ops.equal(ops.unsqueeze(taken, axes=[2]), pool[None, None])  # [N, windows, pool, size]
                matched = ops.reduce_min(ops.cast(same, _C.f32), axes=[3], keepdims=False)  # 1 where every item matches
                hits = ops.reduce_sum(matched, axes=[1], keepdims=False)  # [N, pool]
                found = hits if found is None else found + hits
            if found is not None:
                counts.append(ops.matmul(found, placed[first:first + len(pool)]))
        first += len(pool)
    y = counts[0] if counts else None
    for more in counts[1:]:
        y = y + more
    if y is None:  # no n-gram length in range, or none fits in a row: every count 0
        head = ops.cast(ops.slice(rows, [0], [1], axes=[1]), _C.f32)  # [N, 1], or [N, 0] for empty rows
        y = ops.matmul(ops.cast(ops.not_equal(head, head), _C.f32), np.zeros((min(length, 1), width), np.float32))
    # weight i is output index i's, as ONNX Runtime reads it (ONNX's text says the i-th pool
    # n-gram's: the two agree when ngram_indexes lists the pool in order, as exporters write it)
    weight_at = np.ones(width, np.float32)
    weight_at[:min(width, total)] = weights[:min(width, total)]
    if mode == "IDF":
        y = ops.cast(y > 0.0, _C.f32) * weight_at
    elif mode == "TFIDF":
        y = y * weight_at
    return ops.squeeze(y, axes=[0]) if x.ndim == 1 else y
