"""transpose on the CPU's kernel against numpy: every permutation of ranks 2 to 4 (the last axis
kept, whole rows copied; or moved, 16×16 tiles), each element width, sizes off the tile grid,
and tensors large enough to split over threads."""
import itertools

import numpy as np
import pytest

import esgraph
from esgraph import ops

RNG = np.random.default_rng(3)
DTYPES = [(np.float32, esgraph.f32), (np.float16, esgraph.f16), (np.int64, esgraph.i64), (np.uint8, esgraph.u8),
          (np.bool_, esgraph.bool_)]


def run_transpose(x, esg_dtype, perm):
    with esgraph.GraphBuilder() as b:
        y = ops.transpose(b.input("x", esg_dtype, list(x.shape)), perm=list(perm))
    model = esgraph.compile(b.build([y]))
    return model, model.run([x])[0]


def sample(shape, dtype):
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    return (RNG.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("shape", [(5, 37), (3, 17, 18), (2, 3, 33, 5)], ids=str)
@pytest.mark.parametrize("dtype, esg_dtype", DTYPES, ids=lambda d: getattr(d, "__name__", str(d)))
def test_every_permutation_matches_numpy(shape, dtype, esg_dtype):
    x = sample(shape, dtype)
    for perm in itertools.permutations(range(len(shape))):
        model, got = run_transpose(x, esg_dtype, perm)
        np.testing.assert_array_equal(got, x.transpose(perm), err_msg=str(perm))
        if list(perm) != sorted(perm):  # the identity is no op at all
            assert model.stats()["fast_kernels"] == 1


@pytest.mark.parametrize("shape, perm", [((8, 64, 3136), (0, 2, 1)), ((8, 128, 512), (1, 0, 2)), ((2048, 1000), (1, 0))])
def test_large_transposes_split_over_threads_and_stay_exact(shape, perm):
    x = sample(shape, np.float32)
    _, got = run_transpose(x, esgraph.f32, perm)
    np.testing.assert_array_equal(got, x.transpose(perm))
