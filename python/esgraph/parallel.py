"""Tensor parallelism in the style of Megatron-LM: layers whose weights are split over the ranks
of a group, joined by collectives in the graph (docs/distributed.md).

Every rank builds the same graph from the same full weights; each layer keeps this rank's shard.

- `ColumnParallelLinear` keeps a slice of the output columns. Its result is split along the
  last axis, unless `gather_output=True`.
- `RowParallelLinear` keeps a slice of the input rows and takes an input split like that. It
  sums the partial products with one `all_reduce`, then adds the bias once.
- `ParallelMLP` is a column layer, an activation, then a row layer: one all_reduce per MLP.
- `ParallelAttention` gives each rank its share of the heads (Q, K and V column-parallel, the
  output projection row-parallel): one all_reduce per attention block.

Run a script that uses these under `mpirun -np N`. On one process the world has one rank and
each layer is the whole layer.

    from esgraph import parallel
    with esgraph.GraphBuilder("tp") as b:
        x = b.input("x", esgraph.f32, [batch, seq, model])
        y = parallel.ParallelMLP(w1, b1, w2, b2)(x)
"""
import numpy as np

from . import ops
from ._C import world


class Group:
    """Ranks of the world that split a layer; `None` is the whole world in rank order."""

    def __init__(self, ranks=None):
        size, rank = world()
        self.ranks = list(range(size)) if ranks is None else [int(r) for r in ranks]
        if rank not in self.ranks:
            raise ValueError(f"this process (rank {rank}) is not in the group {self.ranks}")
        self.size = len(self.ranks)
        self.index = self.ranks.index(rank)  # this rank's shard
        self._attr = [] if ranks is None else self.ranks

    def shard(self, array, axis):
        """This rank's piece of `array` (a full weight) cut in `size` equal pieces along `axis`."""
        array = np.asarray(array)
        if array.shape[axis] % self.size:
            raise ValueError(f"a weight of shape {array.shape} does not split in {self.size} along axis {axis}")
        return np.ascontiguousarray(np.split(array, self.size, axis=axis)[self.index])

    def all_reduce(self, x):
        return ops.all_reduce(x, ranks=self._attr)

    def all_gather(self, x, axis):
        return ops.all_gather(x, axis=axis, ranks=self._attr)


def _group(group):
    """A Group (or anything that shards and reduces like one), or the ranks to make one of."""
    return group if hasattr(group, "shard") else Group(group)


class ColumnParallelLinear:
    """y = x @ weight + bias, where `weight` is [in, out] and this rank keeps out / size columns."""

    def __init__(self, weight, bias=None, *, group=None, gather_output=False):
        self.group = _group(group)
        self.weight = self.group.shard(np.asarray(weight, np.float32), axis=1)
        self.bias = None if bias is None else self.group.shard(np.asarray(bias, np.float32), axis=0)
        self.gather_output = gather_output

    def __call__(self, x):
        y = x @ self.weight
        if self.bias is not None:
            y = y + self.bias
        return self.group.all_gather(y, axis=-1) if self.gather_output else y


class RowParallelLinear:
    """y = x @ weight + bias, where `weight` is [in, out] and this rank keeps in / size rows. The input
    is this rank's split of the last axis, as a ColumnParallelLinear gives it, unless
    `input_is_parallel=False`, in which case the layer takes its own slice of a full input."""

    def __init__(self, weight, bias=None, *, group=None, input_is_parallel=True):
        self.group = _group(group)
        self.weight = self.group.shard(np.asarray(weight, np.float32), axis=0)
        self.bias = None if bias is None else np.asarray(bias, np.float32)
        self.input_is_parallel = input_is_parallel

    def __call__(self, x):
        if not self.input_is_parallel:
            rows = self.weight.shape[0]
            x = ops.slice(x, starts=[self.group.index * rows], ends=[(self.group.index + 1) * rows], axes=[-1])
        y = self.group.all_reduce(x @ self.weight)
        return y if self.bias is None else y + self.bias


class ParallelMLP:
    """activation(x @ w1 + b1) @ w2 + b2 with w1's columns and w2's rows split: one all_reduce."""

    def __init__(self, w1, b1, w2, b2, *, group=None, activation=ops.gelu):
        group = _group(group)
        self.fc1 = ColumnParallelLinear(w1, b1, group=group)
        self.fc2 = RowParallelLinear(w2, b2, group=group)
        self.activation = activation

    def __call__(self, x):
        return self.fc2(self.activation(self.fc1(x)))


class ParallelAttention:
    """Multi-head self-attention over x [batch, seq, model] with `heads` heads, each rank computing
    heads / size of them: wq, wk, wv ([model, model]) split by columns, a head's columns staying
    together; wo ([model, model]) split by rows; one all_reduce."""

    def __init__(self, wq, wk, wv, wo, heads, *, bq=None, bk=None, bv=None, bo=None, group=None):
        group = _group(group)
        if heads % group.size:
            raise ValueError(f"{heads} heads do not split over {group.size} ranks")
        self.local_heads = heads // group.size
        self.q, self.k, self.v = (ColumnParallelLinear(w, b, group=group) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        self.out = RowParallelLinear(wo, bo, group=group)

    def __call__(self, x, mask=None):
        ctx = ops.attention(self.q(x), self.k(x), self.v(x), mask=mask, num_heads=self.local_heads)
        return self.out(ctx)


__all__ = ["ColumnParallelLinear", "Group", "ParallelAttention", "ParallelMLP", "RowParallelLinear"]
