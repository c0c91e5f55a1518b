"""NumPy's percentile, taken apart: where it reads a field's order statistics and how it weighs them.

WHY HERE. ``np.percentile`` (method ``"linear"``) is an index computation, a selection and an
interpolation. The selection is exact on every backend (an element of the field is chosen, not
computed), so a backend returns order statistics and the bits of the answer are decided by the
other two steps. Those are NumPy's own lines, written out with the same ufuncs on the same types:
the virtual index ``(n - 1) * q / 100``, its floor and the next index, the weight ``gamma``
(:func:`quantile_plan`), and ``_lerp``'s two branches (:func:`lerp`). The levels operations apply
them to the order statistics a backend selects, and spaCR's patch applies them to the order
statistics it selects itself (a nuclear plane's high percentile): one copy of NumPy's arithmetic,
so the two cannot round apart.

A plain Python number ``q`` is weak (NEP 50): for a float32 field the whole interpolation is
float32, as NumPy gives it; a sequence (or a NumPy number) interpolates in float64. So ``q`` is
checked keeping its type (:func:`percentile_q`), never converted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["QuantilePlan", "lerp", "percentile_q", "quantile_plan"]

_I64 = np.dtype(np.int64)


@dataclass(frozen=True)
class QuantilePlan:
    """Where NumPy reads each percentile of a field of ``count`` pixels, and how it weighs them.

    :param ranks: int64, strictly increasing: the order statistics the backend selects.
    :param lower: for each percentile, the position in ``ranks`` of its lower order statistic.
    :param upper: for each percentile, the position in ``ranks`` of its upper order statistic.
    :param gamma: NumPy's weight: an array in ``q``'s float dtype, or a Python float when ``q``
        is a Python number (NumPy's weak ``q``).
    :param scalar: ``q`` was one number: one value per field, not a row.
    """

    ranks: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    gamma: np.ndarray | float
    scalar: bool


def percentile_q(q: Any, name: str = "q") -> Any:
    """``q`` checked as NumPy would take it, keeping its type (which decides NumPy's arithmetic).

    :param q: a percentile (a Python or NumPy number) or a 1-D sequence of them.
    :param name: the caller's argument name, for the message.
    :returns: a Python ``int``/``float`` as it is (NumPy's weak ``q``), else a 0-d or 1-D array.
    :raises TypeError: ``q`` is not real numbers (a bool, a string, a complex number).
    :raises ValueError: ``q`` has more than one dimension, or a value outside ``[0, 100]`` or NaN.
    """
    if type(q) in (int, float):
        values = np.asarray(float(q))
    else:
        if isinstance(q, (bool, np.bool_)):
            raise TypeError(f"{name} must be a percentile (a number from 0 to 100), got {q!r}")
        try:
            values = np.asarray(q)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a percentile or a sequence of them, got {q!r}") from exc
        if values.dtype.kind not in "iuf":
            raise TypeError(f"{name} must hold real numbers (percentiles from 0 to 100), got dtype {values.dtype}")
        if values.ndim > 1:
            raise ValueError(f"{name} must be one percentile or a 1-D sequence of them, got shape {values.shape}")
        q = values
    with np.errstate(invalid="ignore"):
        valid = bool(np.all((values >= 0) & (values <= 100)))
    if not valid:
        raise ValueError(f"{name} must be percentiles from 0 to 100 (finite), got {values.tolist()!r}")
    return q


def quantile_plan(count: int, q: Any) -> QuantilePlan:
    """NumPy's ``_quantile`` index arithmetic (method ``"linear"``) for a field of ``count`` pixels,
    the same ufuncs on the same types (``q`` as :func:`percentile_q` returns it).

    :param count: the pixels of one field, at least 1.
    :param q: the checked percentiles.
    :returns: the plan.
    """
    weak = type(q) in (int, float)
    quantiles = np.true_divide(q, 100, out=...)
    virtual = np.asanyarray((count - 1) * quantiles)
    previous = np.floor(virtual, out=...)
    following = np.add(previous, 1, out=...)
    above = virtual >= count - 1
    previous[above] = -1
    following[above] = -1
    previous, following = previous.astype(np.intp), following.astype(np.intp)
    gamma = np.asanyarray(virtual - previous, dtype=virtual.dtype)
    low, high = previous.ravel() % count, following.ravel() % count
    ranks = np.unique(np.concatenate([low, high])).astype(_I64)
    return QuantilePlan(ranks=ranks, lower=np.searchsorted(ranks, low), upper=np.searchsorted(ranks, high),
                        gamma=float(gamma) if weak else gamma.ravel(), scalar=virtual.ndim == 0)


def lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray | float) -> np.ndarray:
    """NumPy's ``_lerp``, line for line (its two branches, ``b - a`` in the order statistics' dtype)."""
    diff_b_a = b - a
    lerp_interpolation: np.ndarray = np.add(a, diff_b_a * t, out=...)
    np.subtract(b, diff_b_a * (1 - t), out=lerp_interpolation, where=t >= 0.5, casting="unsafe",
                dtype=type(lerp_interpolation.dtype))
    return lerp_interpolation
