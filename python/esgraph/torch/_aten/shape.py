"""ATen's views, copies, joins, splits and fills."""
import torch

from ... import _C
from ..._compose import gather_elements, pad_or_crop, tiled
from .registry import NeedsShape, Unsupported, as_dtype, constant, converts, esg_dtype, ints, ops, static


def _axis(d, rank):
    return d + rank if d < 0 else d


def reshape_entries(call, target):
    """ATen's target sizes as reshape's entries: a number, 0 where the size is the input's at
    the same axis (symbolic ones included), and -1 for the one size left to infer."""
    have = list(call.arg_val(0).shape)
    entries, unknown = [], 0
    for i, t in enumerate(target):
        if not isinstance(t, torch.SymInt):
            entries.append(int(t))
        elif i < len(have) and str(have[i]) == str(t):
            entries.append(0)
        else:
            entries.append(-1)
            unknown += 1
    if unknown > 1 or (unknown and -1 in [int(t) for t in target if not isinstance(t, torch.SymInt)]):
        raise NeedsShape(f"the target shape {list(target)} has more than one size to infer")
    return entries


@converts("aten.view.default", "aten._unsafe_view.default")
def _view(call, x, size):
    return ops.reshape(x, reshape_entries(call, size))


@converts("aten.permute.default")
def _permute(call, x, dims):
    return ops.transpose(x, perm=[_axis(d, x.ndim) for d in dims])


@converts("aten.t.default")
def _t(call, x):
    return x if x.ndim < 2 else ops.transpose(x, perm=list(range(x.ndim))[::-1])


@converts("aten.transpose.int")
def _transpose(call, x, a, b):
    perm = list(range(x.ndim))
    a, b = _axis(a, x.ndim), _axis(b, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(x, perm=perm)


@converts("aten.expand.default")
def _expand(call, x, size, implicit=False):
    """Broadcast to the result's shape. Where a size is symbolic it is x's own, which esgraph's
    expand (numpy's broadcast_to) cannot leave open: x then broadcasts against zeros of the
    static sizes (a 1 at each symbolic one), one addition."""
    have, out = list(call.arg_val(0).shape), list(call.val.shape)
    lead, shape = len(out) - len(have), []
    for i, o in enumerate(out):
        if not isinstance(o, torch.SymInt):
            shape.append(int(o))
        elif i >= lead and str(have[i - lead]) == str(o):
            shape.append(1)
        else:
            raise NeedsShape(f"the expanded size {o} is symbolic and not the input's")
    if [str(d) for d in have] == [str(d) for d in out]:  # to its own shape (PyTorch's bmm decomposition)
        return x
    if not any(isinstance(o, torch.SymInt) for o in out):
        return ops.expand(x, shape)
    if len(shape) == x.ndim and all(d == 1 or d == h for d, h in zip(shape, have)):
        return _copy(call, x)
    zeros = constant(torch.zeros(shape, dtype=call.val.dtype), x.dtype)
    return ops.logical_or(x, zeros) if x.dtype == getattr(_C, "bool") else x + zeros


@converts("aten.unsqueeze.default")
def _unsqueeze(call, x, dim):
    return ops.unsqueeze(x, [_axis(dim, x.ndim + 1)])


@converts("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def _squeeze(call, x, dims=None):
    dims = range(x.ndim) if dims is None else [dims] if isinstance(dims, int) else dims
    # Dynamo specializes sizes of 1: a symbolic size is never squeezed.
    axes = [_axis(d, x.ndim) for d in dims if x.ndim and _is(call.arg_val(0).shape[_axis(d, x.ndim)], 1)]
    return ops.squeeze(x, axes=axes) if axes else _copy(call, x)


@converts("aten.cat.default")
def _cat(call, tensors, dim=0):
    dtype = esg_dtype(call.val.dtype)
    # ATen skips 1-D empty tensors (the legacy form) and promotes the rest to one type.
    kept = [as_dtype(t, dtype) for t, f in zip(tensors, call.arg_val(0)) if not (f.ndim == 1 and _is(f.shape[0], 0))]
    return ops.concat(kept, _axis(dim, call.val.ndim)) if len(kept) > 1 else _copy(call, kept[0])


@converts("aten.split_with_sizes.default", "aten.split.Tensor")
def _split(call, x, sizes, dim=0):
    dim = _axis(dim, x.ndim)
    if isinstance(sizes, (int, torch.SymInt)):
        sizes = [f.shape[dim] for f in call.val]
    return tuple(ops.split(x, ints(sizes, "a split size"), axis=dim))


@converts("aten.slice.Tensor")
def _slice(call, x, dim=0, start=None, end=None, step=1):
    dim = _axis(dim, x.ndim)
    size = call.arg_val(0).shape[dim]
    # Whole-axis bounds are recognized without comparing a symbolic size (a comparison would
    # add a guard to Dynamo's, and a recompile for every size).
    start = 0 if start is None else start
    to_end = end is None or str(end) == str(size) or (not isinstance(end, torch.SymInt) and end >= 2**62)
    if _is(start, 0) and to_end and _is(step, 1):
        return _copy(call, x)
    end = 2**62 if to_end else static(end, "a slice end")
    return ops.slice(x, [static(start, "a slice start")], [end], axes=[dim], steps=[static(step, "a step")])


def _is(value, number):
    """value is that number, without a guard on a symbolic value (which is then not)."""
    return not isinstance(value, torch.SymInt) and value == number


@converts("aten.select.int")
def _select(call, x, dim, index):
    dim = _axis(dim, x.ndim)
    index = static(index, "a selected index")
    y = ops.slice(x, [index], [index + 1 if index != -1 else 2**62], axes=[dim])
    return ops.squeeze(y, axes=[dim])


def _copy(call, x):
    """A new tensor of x's values (a reshape to the same shape: esgraph's views cost nothing)."""
    return ops.reshape(x, [0] * x.ndim)


@converts("aten.clone.default", "aten.alias.default", "aten.detach.default")
def _clone(call, x, memory_format=None):
    return _copy(call, x)


@converts("aten._to_copy.default", "prims.convert_element_type.default")
def _to_copy(call, x, *args, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None, copy=False):
    want = esg_dtype(call.val.dtype)
    return ops.cast(x, want) if x.dtype != want else _copy(call, x)


@converts("aten.constant_pad_nd.default")
def _pad(call, x, pad, value=0):
    pad = ints(pad, "a padding")
    begins, ends = [0] * x.ndim, [0] * x.ndim
    for k in range(len(pad) // 2):  # pairs from the last axis backwards
        begins[x.ndim - 1 - k], ends[x.ndim - 1 - k] = pad[2 * k], pad[2 * k + 1]
    return pad_or_crop(x, begins + ends, value=float(value))


@converts("aten.full.default", "aten.new_full.default")
def _full(call, *args, dtype=None, layout=None, device=None, pin_memory=None):
    size, value = args[-2], args[-1]
    out = esg_dtype(call.val.dtype)
    return ops.expand(constant(value, out), ints(size, "a filled size")) if size else constant(value, out)


@converts("aten.scalar_tensor.default")
def _scalar_tensor(call, value, dtype=None, layout=None, device=None, pin_memory=None):
    return constant(value, esg_dtype(call.val.dtype))


@converts("aten.arange.start_step", "aten.arange.default", "aten.arange.start")
def _arange(call, *args, dtype=None, layout=None, device=None, pin_memory=None):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    for bound in (start, end, step):
        if isinstance(bound, (torch.SymInt, torch.SymFloat)):
            raise NeedsShape(f"a range bound is the symbolic value {bound}, which this converter needs as a number")
    return constant(torch.arange(start, end, step, dtype=call.val.dtype), esg_dtype(call.val.dtype))


@converts("aten.embedding.default")
def _embedding(call, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return ops.gather(weight, indices, axis=0)


@converts("aten.index_select.default")
def _index_select(call, x, dim, index):
    return ops.gather(x, index, axis=_axis(dim, x.ndim))


@converts("aten.index.Tensor")
def _index(call, x, indices):
    """x[i, j, ...] by index tensors on adjacent axes (the others whole): their broadcast
    positions flattened into one index into those axes merged, one gather (PyTorch's
    decompositions index this way: a resize as x[:, :, rows[:, None], cols])."""
    given = [k for k, i in enumerate(indices) if i is not None]
    if given != list(range(given[0], given[-1] + 1)):
        raise Unsupported("index tensors on axes that are not adjacent (their result axes would move to the front)")
    if any(indices[k].dtype == getattr(_C, "bool") for k in given):
        raise Unsupported("indexing by a boolean mask (a size the data decides): use torch.where")
    first, last = given[0], given[-1]
    if len(given) == 1:
        return ops.gather(x, indices[first], axis=first)
    sizes = ints(call.arg_val(0).shape[first:last + 1], "an indexed axis's size")
    flat, stride = None, 1
    for k, size in zip(reversed(given), reversed(sizes)):
        index = indices[k] if indices[k].dtype == _C.i64 else ops.cast(indices[k], _C.i64)
        # negative positions count from the end of their own axis
        index = ops.where(ops.less(index, as_dtype(0, _C.i64)), index + as_dtype(size, _C.i64), index)
        term = index if stride == 1 else index * as_dtype(stride, _C.i64)
        flat = term if flat is None else flat + term
        stride *= size
    merged = ops.reshape(x, [0] * first + [stride] + ints(call.arg_val(0).shape[last + 1:], "a size after the indexed axes"))
    return ops.gather(merged, flat, axis=first)


@converts("aten.flip.default")
def _flip(call, x, dims):
    axes = [_axis(d, x.ndim) for d in dims]
    return ops.slice(x, [-1] * len(axes), [-2**62] * len(axes), axes=axes, steps=[-1] * len(axes))


@converts("aten.repeat.default")
def _repeat(call, x, repeats):
    repeats = ints(repeats, "a repeat count")
    lead = len(repeats) - x.ndim
    if lead:  # repeat gives x leading unit axes first
        x = ops.unsqueeze(x, list(range(lead)))
    dims = [1] * lead + [int(d) if not isinstance(d, torch.SymInt) else str(d) for d in call.arg_val(0).shape]
    return tiled(x, dims, repeats)


@converts("aten.empty.memory_format")
def _empty(call, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """A tensor whose values the program writes before it reads them: zeros."""
    return ops.expand(constant(0, esg_dtype(call.val.dtype)), ints(call.val.shape, "an empty tensor's size"))


@converts("aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default", "aten.empty_like.default")
def _full_like(call, x, *value, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    fill = constant(value[0] if value else 1 if call.name.startswith("aten.ones") else 0, esg_dtype(call.val.dtype))
    if all(isinstance(d, int) for d in call.val.shape):
        return ops.expand(fill, list(call.val.shape))
    # Sizes that are symbolic are x's: a condition of x's shape (any, its value unused: both
    # branches are the fill) carries that shape to the result.
    return ops.where(ops.equal(x, x), fill, fill)


@converts("aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default",
          "aten.sym_constrain_range.default")
def _assertion(call, *args, **kwargs):
    """What PyTorch checked while tracing; nothing to compute."""
    return None


@converts("aten.as_strided.default")
def _as_strided(call, x, size, stride, storage_offset=None):
    """A view of x's storage. esgraph's tensors have no storage layout of their own: the same
    mapping as x's (a restride PyTorch adds for a memory format; unit axes' strides never
    matter) is x itself, and over a contiguous x any view is a gather of its flat elements."""
    have = call.arg_val(0)
    size, stride = ints(size, "an as_strided size"), ints(stride, "an as_strided stride")
    offset = have.storage_offset() if storage_offset is None else static(storage_offset, "a storage offset")
    if size == ints(have.shape, "an as_strided input's size") and offset == have.storage_offset() and all(
            d == 1 or s == h for d, s, h in zip(size, stride, ints(have.stride(), "a stride"))):
        return _copy(call, x)
    if not have.is_contiguous() or have.storage_offset():
        raise Unsupported(f"as_strided of a tensor laid out with strides {list(have.stride())} (esgraph's are dense)")
    index = torch.full(size, offset, dtype=torch.int64)
    for axis, (d, s) in enumerate(zip(size, stride)):
        index += (torch.arange(d) * s).reshape([d] + [1] * (len(size) - axis - 1))
    return ops.gather(ops.reshape(x, [-1]), constant(index, _C.i64), axis=0)


@converts("aten.gather.default")
def _gather(call, x, dim, index, sparse_grad=False):
    return gather_elements(x, index, dim)


@converts("aten.lift_fresh_copy.default")
def _lift_fresh_copy(call, x):
    """A tensor the program made from Python data (torch.tensor([...])): already a constant."""
    return x


@converts("aten.copy.default")
def _copy_into(call, dst, src, non_blocking=False):
    """dst's shape and dtype with src's values (broadcast): the functional form of copy_."""
    y = as_dtype(src, dst.dtype)
    same = [str(d) for d in call.arg_val(1).shape] == [str(d) for d in call.val.shape]
    return _copy(call, y) if same else ops.expand(y, ints(call.val.shape, "a copied size"))
