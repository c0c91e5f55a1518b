"""The operation table: each primitive defined once, and everything that serves it reads this.

WHY A TABLE. An operation is its hookspec (whose argument names pluggy holds), the check of what a
backend returns, the adapters that let every plugin serve it whatever subset of the arguments it
declares (:mod:`._adapters`), its plain definition (:mod:`spacr_accel_core.reference`), and the
inputs it is tried on. Discovery (what each plugin implements, and whether its signature can serve),
dispatch (the adapters and the result check), the capabilities table the doctor prints (one row per
entry), the bench (its realistic input) and the conformance suite (its small case, judged against its
reference) read :data:`OPERATIONS`; the Dask layer writes each operation's graph itself (the table's
test holds it to one per entry). Adding an operation is one entry here, one hookspec, the ``ops`` function that
checks its input, its reference, and the floor's implementation (``docs/contributing.md``);
``tests/core_layout/test_operation_table.py`` names whatever a new entry still lacks.

THE ADAPTERS KEEP THE HOT PATH BARE. A plugin that declares exactly the spec's arguments and takes
everything it can be sent is called as it is: no wrapper, no cost on the per-tile path.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from .. import reference
from ..contract import _hookspecs
from ..contract._declaration import Declaration
from ._adapters import (
    Adapter,
    Call,
    adapt_correlation,
    adapt_filter,
    adapt_gather,
    adapt_matmul,
    adapt_neighbours,
    adapt_peaks,
    adapt_plain,
    adapt_smoothing,
)
from ._levels import (
    agree_levels,
    bench_percentiles,
    bench_rescale,
    check_order_statistics,
    check_rescaled,
    small_percentiles,
    small_rescale,
)
from ._planes import (
    agree_translated,
    bench_score,
    bench_translation,
    check_translated,
    small_score,
    small_translation,
)
from ._points import (
    agree_attribution,
    agree_counts,
    attribution_bench,
    check_attribution,
    check_counts,
    counts_bench,
    small_attribution,
    small_counts,
)
from ._results import (
    Example,
    agree_coordinates,
    agree_field,
    agree_gathered,
    agree_nearest,
    agree_product,
    agree_registration,
    check_array,
    check_coordinates,
    check_correlation,
    check_gathered,
    check_neighbours,
)

Check = Callable[[Any, Any], "str | None"]
Agree = Callable[[Any, Any], tuple[bool, str]]


@dataclass(frozen=True)
class Operation:
    """One primitive, as the registry serves it.

    :param name: the operation's name (``ops.<name>``); its hook is ``spacr_accel_<name>``.
    :param check: ``check(result, expected)`` says what is wrong with a backend's result, or
        ``None``; a wrong result makes that backend faulty for this operation.
    :param adapt: ``adapt(function, argnames, spec, declaration, operation)`` gives the plugin's
        implementation as a call taking the spec's arguments (:attr:`arguments`) by position
        (:meth:`adapted` calls it; ``operation`` is what the declaration's per-operation facts
        are read for).
    :param optional: arguments a plugin may leave out of its signature, each with the value it then
        serves (a plugin without ``k`` serves ``k=1`` only; ``None`` for a hint such as ``chunk``,
        which the answer does not depend on and which is then simply not passed, as pluggy would).
    :param task: the step of spaCR's science it serves, in the capabilities table's words.
    :param reference: its plain definition (:mod:`spacr_accel_core.reference`), called like
        ``ops.<name>``: what the conformance suite and the bench compare every backend with.
    :param agree: ``agree(expected, got) -> (agrees, detail)``: when two answers are the same
        answer (bit for bit for a filter, within float32 rounding for a product).
    :param small: a tiny input: the conformance suite runs it on every backend, one that cannot
        run here included (it must decline cleanly or agree with :attr:`reference`).
    :param bench: ``bench(quick, rng)``: a realistic input (a camera tile, a well's spots), which
        ``spacr-accel bench`` times on every backend and checks against the floor's answer.
    """

    name: str
    check: Check
    adapt: Adapter
    optional: Mapping[str, object]
    task: str
    reference: Callable[..., Any]
    agree: Agree
    small: Callable[[], Example]
    bench: Callable[[bool, np.random.Generator], Example]

    @property
    def hook(self) -> str:
        """The hook name plugins implement."""
        return f"spacr_accel_{self.name}"

    @functools.cached_property
    def arguments(self) -> tuple[str, ...]:
        """The hookspec's arguments in order: how the core passes them, by position (read once; see
        :meth:`positional`)."""
        return tuple(inspect.signature(getattr(_hookspecs, self.hook)).parameters)

    def positional(self, named: Mapping[str, Any]) -> tuple[Any, ...]:
        """The arguments ``ops`` names, in the hookspec's order: the call is built by name, so what
        ``ops`` passes cannot silently disagree with the order of the specification.

        :raises TypeError: a name the specification lacks, or one of its arguments not given.
        """
        order = self.arguments
        if len(named) == len(order):
            try:
                return tuple(named[name] for name in order)
            except KeyError:
                pass
        raise TypeError(f"{self.hook} takes {', '.join(order)}; given {', '.join(named)}")

    def adapted(self, function: Call, argnames: tuple[str, ...], declaration: Declaration) -> Call:
        """One plugin's implementation as dispatch calls it (see :attr:`adapt`)."""
        return self.adapt(function, argnames, self.arguments, declaration, self.name)

    def missing(self, argnames: tuple[str, ...]) -> tuple[str, ...]:
        """The required arguments a plugin's signature lacks (it cannot serve the operation)."""
        return tuple(a for a in self.arguments if a not in argnames and a not in self.optional)


# ---- the inputs each operation is tried on ------------------------------------------------------


def _camera_tile(quick: bool, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str]:
    """A camera tile (noisy background, bright single-pixel spots, a flat saturated plateau: ties),
    its 128x128 corner with dead pixels (NaN, checked untimed: a backend may decline them), and its
    size in words."""
    side = 512 if quick else 2048
    field = (100.0 + 10.0 * rng.standard_normal((side, side), dtype=np.float32)).astype(np.float32)
    spots = rng.integers(0, side, size=(side, 2))
    field[spots[:, 0], spots[:, 1]] += rng.uniform(500, 2000, size=side).astype(np.float32)
    field[: side // 8, : side // 8] = np.float32(4095.0)
    corner = field[:128, :128].copy()
    dead = rng.integers(0, 128, size=(8, 2))
    corner[dead[:, 0], dead[:, 1]] = np.nan
    return field, corner, f"{side}x{side} float32"


def _filter_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, size 15", (field, 15), checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 15)),))


def _peaks_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, size 7, above 1000", (field, 7), keywords=(("threshold", 1000.0),),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 7)),))


def _matmul_bench(quick: bool, rng: np.random.Generator) -> Example:
    rows = 250_000 if quick else 4_000_000
    intensities = rng.uniform(0, 4095, size=(rows, 4)).astype(np.float32)
    unmix = (np.eye(4) + rng.uniform(-0.1, 0.1, size=(4, 4))).astype(np.float32)
    return Example(f"({rows:,} x 4) @ (4 x 4) float32", (intensities, unmix))


def _nearest_bench(quick: bool, rng: np.random.Generator) -> Example:
    points = 5_000 if quick else 100_000
    source = rng.uniform(0, 2048, size=(points, 2)).astype(np.float32)
    target = rng.uniform(0, 2048, size=(points, 2)).astype(np.float32)
    return Example(f"N = M = {points:,}, D = 2, in a 2048 box", (source, target))


def _small_field() -> Example:
    return Example("a 3x4 ramp, size 3", (np.arange(12, dtype=np.float32).reshape(3, 4), 3))


def _small_product() -> Example:
    return Example("(2 x 3) @ (3 x 2)", (np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((3, 2), np.float32)))


def _small_points() -> Example:
    return Example("3 points to 4", (np.zeros((3, 2)), np.ones((4, 2))))


def _minimum_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, size 5, reflect", (field, 5), keywords=(("mode", "reflect"),),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 5)),))


def _gaussian_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, sigma 3", (field, 3.0),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 1.0)),))


def _laplace_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    planes = 2 if quick else 8
    stack = (100.0 + 10.0 * rng.standard_normal((planes, *field.shape), dtype=np.float32)).astype(np.float32)
    return Example(f"{planes} x {words}, sigma 1", (stack, 1.0),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 1.0)),))


def _gather_bench(quick: bool, rng: np.random.Generator) -> Example:
    cycles, side, reads = (3, 512, 2_000) if quick else (11, 1480, 10_000)
    stack = rng.normal(100.0, 10.0, size=(cycles, 4, side, side)).astype(np.float32)
    points = rng.integers(0, side, size=(reads, 2))
    return Example(f"{reads:,} reads in ({cycles}, 4, {side}, {side}) float32, size 3", (stack, points, 3))


def _registration_bench(quick: bool, rng: np.random.Generator) -> Example:
    pairs, edge = (4, 256) if quick else (8, 1024)
    first = rng.random((pairs, edge, edge)).astype(np.float32)
    shifts = rng.integers(-40, 40, size=(pairs, 2))
    second = np.stack([np.roll(field, tuple(-shift), axis=(0, 1)) for field, shift in zip(first, shifts, strict=True)])
    second += 0.05 * rng.random(second.shape, dtype=np.float32)
    return Example(f"{pairs} pairs of {edge}x{edge} float32", (first, second))


def _small_smoothing() -> Example:
    return Example("a 3x4 ramp, sigma 1", (np.arange(12, dtype=np.float32).reshape(3, 4), 1.0))


def _small_gather() -> Example:
    stack = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return Example("2 fields of 3x4, 2 points, size 3", (stack, [[0, 0], [2, 3]], 3))


def _small_pair() -> Example:
    pair = np.random.default_rng(0).random((6, 8))
    return Example("a 6x8 pair shifted by (1, 2)", (pair, np.roll(pair, (1, 2), axis=(0, 1))))


OPERATIONS: Final[Mapping[str, Operation]] = {
    op.name: op for op in (
        Operation("maximum_filter", check_array, adapt_filter, {"out": None}, "Peak finding (maximum_filter)",
                  reference=reference.maximum_filter, agree=agree_field, small=_small_field, bench=_filter_bench),
        Operation("matmul", check_array, adapt_matmul, {"out": None}, "Spectral unmixing (matmul)",
                  reference=reference.matmul, agree=agree_product, small=_small_product, bench=_matmul_bench),
        Operation("nearest_neighbours", check_neighbours, adapt_neighbours,
                  {"chunk": None, "k": 1, "max_distance": None, "metric": "euclidean"},
                  "Cell matching (nearest_neighbours)",
                  reference=reference.nearest_neighbours, agree=agree_nearest, small=_small_points,
                  bench=_nearest_bench),
        Operation("local_maxima", check_coordinates, adapt_peaks, {}, "Reads as coordinates (local_maxima)",
                  reference=reference.local_maxima, agree=agree_coordinates, small=_small_field, bench=_peaks_bench),
        Operation("minimum_filter", check_array, adapt_filter, {"out": None}, "Background floor (minimum_filter)",
                  reference=reference.minimum_filter, agree=agree_field, small=_small_field, bench=_minimum_bench),
        Operation("gaussian_filter", check_array, adapt_smoothing, {"out": None}, "Smoothing (gaussian_filter)",
                  reference=reference.gaussian_filter, agree=agree_field, small=_small_smoothing,
                  bench=_gaussian_bench),
        Operation("gaussian_laplace", check_array, adapt_smoothing, {"out": None},
                  "Spot enhancement (gaussian_laplace)",
                  reference=reference.gaussian_laplace, agree=agree_field, small=_small_smoothing,
                  bench=_laplace_bench),
        Operation("window_maxima", check_gathered, adapt_gather, {}, "Base intensities at reads (window_maxima)",
                  reference=reference.window_maxima, agree=agree_gathered, small=_small_gather, bench=_gather_bench),
        Operation("phase_correlate", check_correlation, adapt_correlation,
                  {"pairing": None}, "Cycle registration (phase_correlate)",
                  reference=reference.phase_correlate, agree=agree_registration, small=_small_pair,
                  bench=_registration_bench),
        Operation("translate", check_translated, adapt_plain, {}, "Moving planes into one frame (translate)",
                  reference=reference.translate, agree=agree_translated, small=small_translation,
                  bench=bench_translation),
        Operation("spot_score", check_array, adapt_plain, {}, "Read locations scored (spot_score)",
                  reference=reference.spot_score, agree=agree_field, small=small_score, bench=bench_score),
        Operation("attribute_reads", check_attribution, adapt_plain, {}, "Reads given to nuclei (attribute_reads)",
                  reference=reference.attribute_reads, agree=agree_attribution, small=small_attribution,
                  bench=attribution_bench),
        Operation("count_within", check_counts, adapt_plain, {}, "Merge transforms scored (count_within)",
                  reference=reference.count_within, agree=agree_counts, small=small_counts, bench=counts_bench),
        Operation("percentiles", check_order_statistics, adapt_plain, {}, "Channel levels (percentiles)",
                  reference=reference.percentiles, agree=agree_levels, small=small_percentiles,
                  bench=bench_percentiles),
        Operation("rescale_fields", check_rescaled, adapt_plain, {}, "Channel clip and scale (rescale_fields)",
                  reference=reference.rescale_fields, agree=agree_levels, small=small_rescale, bench=bench_rescale),
    )
}
"""Every primitive, by name, in the order the doctor and the bench list them."""
