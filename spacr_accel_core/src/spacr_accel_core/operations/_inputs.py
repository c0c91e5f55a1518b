"""The inputs the first operations are tried on: their small cases and their bench inputs.

A small case is tiny, so the conformance suite can run it on every backend, one that cannot run
here included (it must decline cleanly or agree with the reference). A bench input is realistic (a
camera tile, a well's spots), what ``spacr-accel bench`` times on every backend and checks against
the floor's answer. The later families keep theirs beside their checks (``_levels``, ``_planes``,
``_points``).
"""

from __future__ import annotations

import numpy as np

from ._results import Example


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


def filter_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, size 15", (field, 15), checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 15)),))


def peaks_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, size 7, above 1000", (field, 7), keywords=(("threshold", 1000.0),),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 7)),))


def matmul_bench(quick: bool, rng: np.random.Generator) -> Example:
    rows = 250_000 if quick else 4_000_000
    intensities = rng.uniform(0, 4095, size=(rows, 4)).astype(np.float32)
    unmix = (np.eye(4) + rng.uniform(-0.1, 0.1, size=(4, 4))).astype(np.float32)
    return Example(f"({rows:,} x 4) @ (4 x 4) float32", (intensities, unmix))


def nearest_bench(quick: bool, rng: np.random.Generator) -> Example:
    points = 5_000 if quick else 100_000
    source = rng.uniform(0, 2048, size=(points, 2)).astype(np.float32)
    target = rng.uniform(0, 2048, size=(points, 2)).astype(np.float32)
    return Example(f"N = M = {points:,}, D = 2, in a 2048 box", (source, target))


def small_field() -> Example:
    return Example("a 3x4 ramp, size 3", (np.arange(12, dtype=np.float32).reshape(3, 4), 3))


def small_product() -> Example:
    return Example("(2 x 3) @ (3 x 2)", (np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((3, 2), np.float32)))


def small_points() -> Example:
    return Example("3 points to 4", (np.zeros((3, 2)), np.ones((4, 2))))


def minimum_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, size 5, reflect", (field, 5), keywords=(("mode", "reflect"),),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 5)),))


def gaussian_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    return Example(f"{words}, sigma 3", (field, 3.0),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 1.0)),))


def laplace_bench(quick: bool, rng: np.random.Generator) -> Example:
    field, corner, words = _camera_tile(quick, rng)
    planes = 2 if quick else 8
    stack = (100.0 + 10.0 * rng.standard_normal((planes, *field.shape), dtype=np.float32)).astype(np.float32)
    return Example(f"{planes} x {words}, sigma 1", (stack, 1.0),
                   checks=(("dead pixels (NaN) in a 128x128 corner", (corner, 1.0)),))


def gather_bench(quick: bool, rng: np.random.Generator) -> Example:
    cycles, side, reads = (3, 512, 2_000) if quick else (11, 1480, 10_000)
    stack = rng.normal(100.0, 10.0, size=(cycles, 4, side, side)).astype(np.float32)
    points = rng.integers(0, side, size=(reads, 2))
    return Example(f"{reads:,} reads in ({cycles}, 4, {side}, {side}) float32, size 3", (stack, points, 3))


def registration_bench(quick: bool, rng: np.random.Generator) -> Example:
    pairs, edge = (4, 256) if quick else (8, 1024)
    first = rng.random((pairs, edge, edge)).astype(np.float32)
    shifts = rng.integers(-40, 40, size=(pairs, 2))
    second = np.stack([np.roll(field, tuple(-shift), axis=(0, 1)) for field, shift in zip(first, shifts, strict=True)])
    second += 0.05 * rng.random(second.shape, dtype=np.float32)
    return Example(f"{pairs} pairs of {edge}x{edge} float32", (first, second))


def small_smoothing() -> Example:
    return Example("a 3x4 ramp, sigma 1", (np.arange(12, dtype=np.float32).reshape(3, 4), 1.0))


def small_gather() -> Example:
    stack = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return Example("2 fields of 3x4, 2 points, size 3", (stack, [[0, 0], [2, 3]], 3))


def small_pair() -> Example:
    pair = np.random.default_rng(0).random((6, 8))
    return Example("a 6x8 pair shifted by (1, 2)", (pair, np.roll(pair, (1, 2), axis=(0, 1))))
