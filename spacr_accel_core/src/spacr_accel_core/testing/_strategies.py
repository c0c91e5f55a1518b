"""The hypothesis strategies of the conformance suite: random shapes, sizes and dtypes, NaN and
infinity, integer grids full of ties and duplicates, tight clusters beside far outliers."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


@st.composite
def tie_heavy_point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """``(source, target)`` float32 point sets made of few distinct rows in many copies: signed zeros,
    values equal in float32 (``1e7`` and ``1e7 + 1``), and sometimes a few distinct points before or
    after the copies, so the lowest index must win among copies placed anywhere.

    The worst case of an exact search (every copy is a tie), for a backend's own tests.
    """
    width = draw(st.sampled_from([1, 2, 3, 8, 12]))
    pool = draw(hnp.arrays(np.float32, (draw(st.integers(1, 6)), width),
                           elements=st.sampled_from([0.0, -0.0, 1.0, 2.0, -1.0, 1e7, 1e7 + 1.0])))
    n, m = draw(st.integers(1, 300)), draw(st.integers(1, 300))
    source = pool[draw(hnp.arrays(np.int64, n, elements=st.integers(0, pool.shape[0] - 1)))]
    target = pool[draw(hnp.arrays(np.int64, m, elements=st.integers(0, pool.shape[0] - 1)))]
    if draw(st.booleans()):
        extra = draw(hnp.arrays(np.float32, (draw(st.integers(1, 20)), width), elements=st.floats(-3, 3, width=32)))
        target = np.concatenate([extra, target]) if draw(st.booleans()) else np.concatenate([target, extra])
    return np.ascontiguousarray(source), np.ascontiguousarray(target)


@st.composite
def filter_stacks(draw: st.DrawFn) -> np.ndarray:
    """A field or a stack of fields (``(H, W)``, ``(3, H, W)`` or ``(2, 2, H, W)``, sides 1 to 20) in a
    camera's or a float dtype: floats drawn among signed zeros, NaN and infinity, integers among a few
    values, so windows hold ties everywhere. For a backend's own tests of a stack filter against the
    same filter field by field."""
    lead = draw(st.sampled_from([(), (3,), (2, 2)]))
    shape = (*lead, draw(st.integers(1, 20)), draw(st.integers(1, 20)))
    dtype = draw(st.sampled_from([np.float32, np.uint16, np.uint8, np.float64]))
    if np.dtype(dtype).kind == "f":
        elements = st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.1, math.nan, math.inf])
    else:
        elements = st.integers(0, 3)
    return draw(hnp.arrays(dtype, shape, elements=elements))


@st.composite
def landmark_point_sets(draw: st.DrawFn, *, most: tuple[int, int] = (35, 60), least_span: int = 3,
                        rounded: bool | None = True) -> tuple[np.ndarray, np.ndarray]:
    """``(source, target)`` float64 ``(N, 2)`` centres for triangle matching: pixel grids full of ties,
    duplicates and collinear runs; fractional centres; tiny ones whose triangles are degenerate; or a
    turned, moved and scaled subset of the target (the case a match must find).

    :param most: the most source and target points.
    :param least_span: the narrowest pixel grid's side.
    :param rounded: whether the moved subset is rounded to whole pixels (None: drawn).
    """
    kind = draw(st.sampled_from(["pixels", "fractional", "tiny", "related"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    targets, sources = draw(st.integers(0, most[1])), draw(st.integers(0, most[0]))
    if kind == "pixels":
        span = draw(st.integers(least_span, 15))
        target = rng.integers(0, span, (targets, 2)).astype(float)
        return rng.integers(0, span, (sources, 2)).astype(float), target
    if kind in ("fractional", "tiny"):
        size = 100.0 if kind == "fractional" else 1e-7
        target = rng.normal(size=(targets, 2)) * size
        return rng.normal(size=(sources, 2)) * size, target
    target = np.round(rng.uniform(0, 200, (targets, 2)))
    angle = draw(st.floats(-0.5, 0.5))
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    chosen = target[rng.permutation(targets)[:sources]]
    source = (chosen - 17.0) @ turn.T * draw(st.sampled_from([1.0, 2.0, 5.3]))
    if rounded if rounded is not None else draw(st.booleans()):
        source = np.round(source)
    return source, target


def packed_descriptors(widths: tuple[int, ...] = (1, 3, 32, 33, 64), sources: tuple[int, int] = (1, 60),
                       targets: tuple[int, int] = (1, 60),
                       distinct: tuple[int, int] = (1, 5)) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """``(source, target)`` packed binary descriptors (uint8 rows, ORB's 32 bytes among the widths):
    half the time a few distinct rows in many copies (every distance tied), else random rows.

    :param widths: the byte widths to draw from (a backend's piece boundaries: 32 and 33 bytes
        straddle one).
    :param sources: the least and most source rows.
    :param targets: the least and most target rows.
    :param distinct: the least and most distinct rows of the tied sets.
    """

    @st.composite
    def draw_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
        width = draw(st.sampled_from(widths))
        n, m = draw(st.integers(*sources)), draw(st.integers(*targets))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        if draw(st.booleans()):
            pool = rng.integers(0, 256, (int(rng.integers(distinct[0], distinct[1] + 1)), width), dtype=np.uint8)
            return pool[rng.integers(0, len(pool), n)], pool[rng.integers(0, len(pool), m)]
        return (rng.integers(0, 256, (n, width), dtype=np.uint8),
                rng.integers(0, 256, (m, width), dtype=np.uint8))

    return draw_sets()


_FIELD_DTYPES = st.sampled_from([np.float32, np.float64, np.int16, np.uint8, np.uint16, np.int8, np.bool_])
_CAMERA_DTYPES = (np.uint8, np.int8, np.uint16, np.int16)
"""The field dtypes a plugin may take unconverted (``Declaration.field_dtypes``); each is checked
bit for bit against the filter of its float32 cast, whether the plugin declared it or not."""


@st.composite
def _fields(draw: st.DrawFn, *, special: bool = True) -> np.ndarray:
    dtype = np.dtype(draw(_FIELD_DTYPES))
    shape = draw(st.tuples(st.integers(1, 24), st.integers(1, 24)))
    if dtype.kind == "f":
        elements = st.floats(-1e6, 1e6, allow_nan=False, width=32)
        if special and draw(st.booleans()):
            elements = st.one_of(elements, st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]))
        data = draw(hnp.arrays(dtype, shape, elements=elements))
    else:
        data = draw(hnp.arrays(dtype, shape))
    if draw(st.booleans()) and data.shape[0] > 1:
        data = data[::-1].T  # a non-contiguous view
    return data


@st.composite
def _point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    width = draw(st.sampled_from([1, 2, 3, 5, 17]))
    n = draw(st.integers(1, 40))
    m = draw(st.integers(1, 40))
    if draw(st.booleans()):
        # A small integer grid: full of exact ties and duplicate targets.
        grid = st.integers(-3, 3)
        source = draw(hnp.arrays(np.int32, (n, width), elements=grid))
        target = draw(hnp.arrays(np.int32, (m, width), elements=grid))
        return source.astype(draw(st.sampled_from([np.float32, np.float64, np.int64]))), target
    coordinates = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=32)
    source = draw(hnp.arrays(np.float32, (n, width), elements=coordinates))
    target = draw(hnp.arrays(np.float32, (m, width), elements=coordinates))
    return source, target


@st.composite
def _operands(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.uint8, np.float16])))
    inner = draw(st.integers(1, 16))
    rows = draw(st.integers(1, 12))
    cols = draw(st.integers(1, 12))
    form = draw(st.sampled_from(["matrix", "vector-left", "vector-right", "batch"]))
    shapes = {
        "matrix": ((rows, inner), (inner, cols)),
        "vector-left": ((inner,), (inner, cols)),
        "vector-right": ((rows, inner), (inner,)),
        "batch": ((2, rows, inner), (inner, cols)),
    }[form]
    elements = (st.floats(-100, 100, allow_nan=False, width=16 if dtype == np.float16 else 32)
                if dtype.kind == "f" else None)
    first = draw(hnp.arrays(dtype, shapes[0], elements=elements))
    second = draw(hnp.arrays(dtype, shapes[1], elements=elements))
    return first, second


_CLUSTER_OUTLIERS = tuple(float(np.float32(v)) for v in (3.4e38, -3.4e38, 1e-45, -1e-45, 1e-38, 0.0, -0.0,
                                                         np.inf, -np.inf))
"""Values a tight cluster of floats is met beside: the extremes of float32, subnormals, both zeros."""


@st.composite
def _clustered_fields(draw: st.DrawFn) -> np.ndarray:
    """Plateaus of a few neighbouring float32 values (ties everywhere) beside far outliers.

    A backend that compares anything but the float32 values themselves (a subtraction, a
    narrower type, a fused scale) tells neighbouring floats apart wrongly, or not at all.
    """
    base = np.float32(draw(st.floats(-(2.0**100), 2.0**100, width=32)))
    up = np.nextafter(base, np.float32(np.inf))
    cluster = [base, up, np.nextafter(up, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))]
    outliers = draw(st.lists(st.sampled_from(_CLUSTER_OUTLIERS), max_size=3))
    elements = st.sampled_from([float(v) for v in cluster] + outliers)
    shape = draw(st.tuples(st.integers(1, 20), st.integers(1, 20)))
    return draw(hnp.arrays(np.float32, shape, elements=elements))


@st.composite
def _clustered_point_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A tight cluster of sources and targets (duplicates and exact ties after float32 rounding)
    far from the origin, with a few targets far away.

    The case that breaks the ``|t|^2 - 2 s.t`` expansion of a GEMM-based search: the outliers
    set the scale, and the cluster's distances are far below the expansion's rounding.
    """
    width = draw(st.sampled_from([1, 2, 3, 8]))
    centre = draw(st.floats(-1e4, 1e4, width=32))
    spacing = draw(st.sampled_from([2.0**-10, 2.0**-4, 1e-3, 0.5]))
    steps = st.integers(-3, 3)
    n = draw(st.integers(1, 24))
    m = draw(st.integers(1, 24))
    source = centre + spacing * draw(hnp.arrays(np.int32, (n, width), elements=steps)).astype(np.float64)
    target = centre + spacing * draw(hnp.arrays(np.int32, (m, width), elements=steps)).astype(np.float64)
    far = st.floats(1e5, 1e7) | st.floats(-1e7, -1e5)
    outliers = draw(hnp.arrays(np.float64, (draw(st.integers(0, 4)), width), elements=far))
    target = np.concatenate([target, outliers])
    order = draw(st.permutations(range(len(target))))
    return source.astype(np.float32), target[list(order)].astype(np.float32)


@st.composite
def _clustered_operands(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Near-equal entries beside entries a million times larger or smaller: cancellation."""
    inner = draw(st.integers(1, 12))
    rows = draw(st.integers(1, 8))
    cols = draw(st.integers(1, 8))
    values = [1.0, 1.0 + 2.0**-20, 1.0 - 2.0**-20, -1.0, 1e6, -1e6, 1e-6, 0.0]
    elements = st.sampled_from(values)
    return (draw(hnp.arrays(np.float32, (rows, inner), elements=elements)),
            draw(hnp.arrays(np.float32, (inner, cols), elements=elements)))


# differing_executors: the same @given method runs once per backend subclass, by design.
