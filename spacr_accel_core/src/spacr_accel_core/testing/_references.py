"""The conformance checks' names for the primitives' plain answers (the windowed maximum, the nearest
neighbour, the product) and the bit-for-bit field comparison the checks share.

The windowed maximum is :func:`spacr_accel_core.reference.maximum_filter` itself, one definition for
the operation table and the checks. The nearest neighbour is written out here again for a reason of
its own: it is the checks' large reference (thousands of sources against tens of thousands of
targets), the first minimum of each row in a bounded block, where the package's ``k`` nearest sorts
every row. The product comes with the bound that judges a float32 one. Imports numpy and
:mod:`spacr_accel_core.reference` only.
"""

from __future__ import annotations

import numpy as np

from .. import reference


def reference_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
    """The contract's windowed maximum: :func:`spacr_accel_core.reference.maximum_filter` with the
    field's edge repeated (``"nearest"``), the maximum of every window.

    A window holding a NaN is NaN, which is the NaN rule; a maximum of zero is ``+0.0``, the
    contract's sign of zero.

    :param field: a 2-D array (taken as float32; beyond float32's range, infinity).
    :param size: the window edge (even raised to odd; ``<= 1`` is a copy, its zeros ``+0.0`` too).
    """
    return reference.maximum_filter(field, size)


def assert_same_field(got: np.ndarray, expected: np.ndarray) -> None:
    """Bit-identical float32 fields: the same NaN positions and the same bits everywhere else.

    ``np.array_equal`` would call ``-0.0`` and ``+0.0`` equal, which is exactly what a
    bit-identity check must not do; NaN payloads are free to differ.

    :param got: what the backend returned.
    :param expected: the reference.
    """
    assert got.dtype == np.float32 and expected.dtype == np.float32, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    differ = (got.view(np.uint32) != expected.view(np.uint32)) & ~nan
    assert not differ.any(), f"{int(differ.sum())} pixels differ, first at {np.argwhere(differ)[0].tolist()}"


def reference_nearest(source: np.ndarray, target: np.ndarray, *,
                      memory: int = 64 * 2**20) -> tuple[np.ndarray, np.ndarray]:
    """The contract's nearest neighbours, plainly: every pair, float64, coordinates in order.

    Deliberately written out here rather than built on :mod:`spacr_accel_core.exact`, which the
    shipped backends use: a reference that shared their code would share their bugs.

    The pairs are taken a block of source rows at a time, so a large check (7,000 x 50,000 pairs)
    holds ``memory`` bytes of distances rather than all of them (9 GB). Each row's distances are
    the same operations whatever the block, so the answers do not depend on it.

    :param source: ``(N, D)`` points (taken as float32, like the ops do).
    :param target: ``(M, D)`` points.
    :param memory: bytes of float64 distances (and one difference) held at once; bounds the
        reference's memory on a laptop. At least one source row is always taken.
    :returns: int64 indices (first minimum: the lowest index on a tie) and float32 distances.
    :raises ValueError: ``memory`` is not positive.
    """
    if isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0:
        raise ValueError(f"memory must be a positive number of bytes, got {memory!r}")
    s = np.asarray(source).astype(np.float32).astype(np.float64)
    t = np.asarray(target).astype(np.float32).astype(np.float64)
    if t.shape[0] == 0:
        return np.full(s.shape[0], -1, np.int64), np.full(s.shape[0], np.inf, np.float32)
    index = np.empty(s.shape[0], np.int64)
    best = np.empty(s.shape[0], np.float64)
    rows = max(1, memory // (2 * 8 * t.shape[0]))  # the running sum and one squared difference
    # The running sum and one difference, allocated once: a block holds these two arrays and never
    # a third (a fresh pair each block would be made while the last one is still held).
    sums = np.empty((min(rows, s.shape[0]), t.shape[0]))
    difference = np.empty_like(sums)
    for start in range(0, s.shape[0], rows):
        block = s[start:start + rows]
        squared, square = sums[:block.shape[0]], difference[:block.shape[0]]
        squared.fill(0.0)
        for axis in range(s.shape[1]):
            np.subtract(block[:, None, axis], t[None, :, axis], out=square)
            np.square(square, out=square)
            squared += square
        found = np.argmin(squared, axis=1)
        index[start:start + rows] = found
        best[start:start + rows] = squared[np.arange(block.shape[0]), found]
    return index, np.sqrt(best).astype(np.float32)


def reference_matmul(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact product in float64 and a bound on float32 rounding for each entry.

    :returns: ``(product, tolerance)``: a float32 backend must land within ``tolerance``.
    """
    a = np.asarray(first).astype(np.float64)
    b = np.asarray(second).astype(np.float64)
    inner = a.shape[-1]
    bound = np.matmul(np.abs(a), np.abs(b))
    # float32 accumulation over `inner` terms plus the rounding of inputs and the result.
    tolerance = (2 * inner + 4) * float(np.finfo(np.float32).eps) * bound + 1e-30
    return np.matmul(a, b), tolerance
