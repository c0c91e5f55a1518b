"""How the patch serves ``spacr.ops_merge.align_by_triangles`` (the phenotype phase's triangle
consensus): the registry's ``match_triangles``, every triangle, every match and every similarity at
once in arrays, with spaCR's bits, or the call left to spaCR.

WHY. spaCR describes each Delaunay triangle in a Python loop and fits one similarity per descriptor
match, a 2 x 2 singular value decomposition each, in another: on the benchmark plate's anchor fields
(about 100 phenotype nuclei against 2,000 sequencing ones) that is 4,500 triangles and 6,500 fits a
call, a quarter of a second. ``ops.match_triangles`` is that consensus as an operation of the
registry: SciPy's own ``Delaunay`` and ``cKDTree`` (the matches in the tree's order, as spaCR's
per-descriptor queries return them), BLAS's own ``ddot`` and ``gemm`` and LAPACK's own ``gesdd``
and ``getrf`` per matrix on stacks, the votes pooled by spaCR's expressions. Here only what spaCR
does around it: its ``min_votes``, its ``None``, and what it raises. That the stacked calls give
the per-item bits is checked once a process on a fixed probe; where it does not hold, the
operation would make the per-item calls one at a time, no faster than spaCR, so every call is
spaCR's.

WHAT IS LEFT TO spaCR, decided before anything is computed: arguments its signature does not take;
points that are not a plain ndarray, list or tuple of real numbers read as ``(N, 2)`` rows (its
``reshape(-1, 2)`` and its row indexing would part ways on any other shape); a cast NumPy warns
about; a NaN, an infinity or a coordinate beyond :data:`LARGEST` (its arithmetic could overflow and
warn); a ``tolerance`` that is not one finite number at least zero, or a ``min_votes`` that is not a
real number; a caller's ``np.errstate`` that reports underflow; a ``triangle_descriptors`` or
``_similarity_from_pairs`` in spaCR's module that is not spaCR's own. After the triangulations, a
point set Qhull refuses (spaCR raises Qhull's error) and a call with no vote whose ``min_votes``
lets it go on to the pooling (spaCR warns over an empty median, then raises) are spaCR's too;
nothing the caller handed in is changed on the way.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from ..kit._triangles import batches_match_single_calls
from ._errstate import underflow_ignored
from ._outcome import PassThrough, finite_extent, served_by

__all__ = ["LARGEST", "align_by_triangles"]

LARGEST = 1e60
"""The largest coordinate served: a side's square, a covariance, a scale (its variance is above
``1e-12``) and a moved vertex all stay far below float64's overflow."""

_HELPERS = ("triangle_descriptors", "_similarity_from_pairs")
"""spaCR's functions that its ``align_by_triangles`` looks up in its module at each call."""


def _points(value: Any, name: str) -> np.ndarray:
    """``value`` as spaCR reads it (``np.asarray(value, float)``), checked to be finite ``(N, 2)``
    rows within :data:`LARGEST`."""
    if type(value) is np.ndarray:
        given = value
    elif type(value) in (list, tuple):
        try:
            given = np.asarray(value)
        except (TypeError, ValueError):
            raise PassThrough(f"{name} NumPy cannot read as an array") from None
    else:
        raise PassThrough(f"{name} of type {type(value).__name__} (the patch serves an ndarray, list or tuple)")
    if given.dtype.kind not in "biuf":
        raise PassThrough(f"{name} of dtype {given.dtype} (NumPy's cast of it is spaCR's own)")
    if given.ndim != 2 or given.shape[1] != 2:
        raise PassThrough(f"{name} that is not (N, 2) rows")
    points = np.asarray(given, dtype=np.float64)
    finite_extent(points, name, LARGEST)
    return points


def _tolerance(value: Any) -> float:
    """One finite number at least zero, read as SciPy's ball query reads it (float64, exactly)."""
    exact = (int, float, np.float64, np.float32, np.float16)
    if isinstance(value, bool) or not (type(value) in exact or isinstance(value, np.integer)):
        raise PassThrough(f"tolerance={value!r} (the patch serves one Python or NumPy real number)")
    number = float(value)
    if isinstance(value, (int, np.integer)) and number != value:
        raise PassThrough(f"tolerance={value!r} (an integer float64 does not hold)")
    if not (math.isfinite(number) and number >= 0):
        raise PassThrough(f"tolerance={value!r} (the patch serves a finite tolerance at least zero)")
    return number


def _spacrs_helpers(original: Callable[..., Any]) -> None:
    """spaCR's function calls its module's helpers by name: another function put there answers
    otherwise than the kit, so the call is spaCR's."""
    names = getattr(original, "__globals__", {})
    for helper in _HELPERS:
        function = names.get(helper)
        if getattr(function, "__module__", None) != original.__module__ or getattr(
                function, "__qualname__", None) != helper:
            raise PassThrough(f"spaCR's {helper} replaced in its module")


def align_by_triangles(source: Any, target: Any, *args: Any, original: Callable[..., Any],
                       **options: Any) -> tuple[Any, str]:
    """``spacr.ops_merge.align_by_triangles``: spaCR's triangle consensus by the registry's
    ``match_triangles`` (see the module), with spaCR's bits; its defaults are read from spaCR's own
    function.

    :param source: ``(N, 2)`` points in the frame to be moved.
    :param target: ``(M, 2)`` points in the frame to move to.
    :param args: anything else given by position (spaCR's keywords are keyword-only: refused there).
    :param original: spaCR's own function.
    :param options: ``tolerance`` and ``min_votes``.
    :returns: spaCR's answer, ``(scale, rotation, translation)`` or None, and the backend that served it.
    :raises PassThrough: where only spaCR's own function gives its answer (see the module).
    """
    try:
        bound = inspect.signature(original).bind(source, target, *args, **options)
    except TypeError:
        raise PassThrough("arguments spaCR's signature does not take") from None
    bound.apply_defaults()
    given = bound.arguments
    underflow_ignored()
    _spacrs_helpers(original)
    src, dst = _points(given["source"], "source"), _points(given["target"], "target")
    tolerance = _tolerance(given["tolerance"])
    min_votes = given["min_votes"]
    if isinstance(min_votes, complex) or not isinstance(min_votes, numbers.Real):
        raise PassThrough(f"min_votes={min_votes!r} (the patch serves a real number)")
    if not batches_match_single_calls():
        raise PassThrough("this NumPy's stacked calls round otherwise than its per-item calls")
    try:
        match = ops.match_triangles(src, dst, tolerance=tolerance)
    except ValueError:  # Qhull's refusal is raised by spaCR's own call, as it words it
        raise PassThrough("a point set Qhull does not triangulate") from None
    backend = served_by()
    if src.shape[0] < 3 or dst.shape[0] < 3:  # a side with no triangle: spaCR's None, whatever min_votes
        return None, backend
    needed: Any = min_votes  # compared as spaCR compares it, whatever real type it is
    if match.votes < needed:
        return None, backend
    if match.votes == 0:
        raise PassThrough("no vote, and a min_votes that lets spaCR pool none")
    return (match.scale, match.rotation, match.translation), backend
