"""The operation table: each primitive defined once, and everything that serves it reads this.

WHY A TABLE. An operation is its hookspec (whose argument names pluggy holds), the check of what a
backend returns, and the adapters that let every plugin serve it whatever subset of the arguments
it declares (a camera field cast for a plugin that did not name the dtype, a stack handed over one
field at a time, ``out=`` filled by a copy, ``max_distance`` applied after a plugin that does not
prune). Discovery (what each plugin implements, and whether its signature can serve), dispatch
(the adapters and the result check), the capabilities table the doctor prints (one row per entry)
and the bench (a test fails when an operation has no case) read :data:`OPERATIONS`; the
conformance suite follows each plugin's ``operations``. Adding an operation is one entry here, one
hookspec, the ``ops`` function that checks its input, and the backends that implement it.

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

from . import _hookspecs
from ._checks import _F32, _I64, _ZERO
from ._declaration import NARROW_FIELDS, Declaration
from ._errors import BackendDeclined

Call = Callable[..., Any]
Adapter = Callable[[Call, tuple[str, ...], tuple[str, ...], Declaration], Call]
Check = Callable[[Any, Any], "str | None"]


@dataclass(frozen=True)
class Operation:
    """One primitive, as the registry serves it.

    :param name: the operation's name (``ops.<name>``); its hook is ``spacr_accel_<name>``.
    :param check: ``check(result, expected)`` says what is wrong with a backend's result, or
        ``None``; a wrong result makes that backend faulty for this operation.
    :param adapt: ``adapt(function, argnames, spec, declaration)`` gives the plugin's
        implementation as a call taking the spec's arguments (:attr:`arguments`) by position.
    :param optional: arguments a plugin may leave out of its signature, each with the value it then
        serves (a plugin without ``k`` serves ``k=1`` only; ``None`` for a hint such as ``chunk``,
        which the answer does not depend on and which is then simply not passed, as pluggy would).
    :param task: the step of spaCR's science it serves, in the capabilities table's words.
    """

    name: str
    check: Check
    adapt: Adapter
    optional: Mapping[str, object]
    task: str

    @property
    def hook(self) -> str:
        """The hook name plugins implement."""
        return f"spacr_accel_{self.name}"

    @functools.cached_property
    def arguments(self) -> tuple[str, ...]:
        """The hookspec's arguments in order: how the core passes them, by position (read once)."""
        return tuple(inspect.signature(getattr(_hookspecs, self.hook)).parameters)

    def missing(self, argnames: tuple[str, ...]) -> tuple[str, ...]:
        """The required arguments a plugin's signature lacks (it cannot serve the operation)."""
        return tuple(a for a in self.arguments if a not in argnames and a not in self.optional)


def by_position(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...]) -> Call:
    """``function`` callable with the spec's arguments in the spec's order, as pluggy would call it.

    pluggy passes each implementation the arguments IT declares, in its own order, and a subset is
    valid; the hot path passes the spec's arguments by position, so an implementation declaring
    exactly those is called as it is, and only one that reorders or drops arguments gets an adapter.
    """
    if argnames == spec:
        return function
    picks = tuple(spec.index(name) for name in argnames)

    def adapted(*args: Any) -> Any:
        return function(*[args[i] for i in picks])

    return adapted


# ---- result checks --------------------------------------------------------------------------


def check_array(result: Any, expected: tuple[tuple[int, ...], np.ndarray | None]) -> str | None:
    """A float32 array of the expected shape (``out`` itself when one was given)."""
    shape, out = expected
    if type(result) is np.ndarray and result.dtype is _F32 and result.shape == shape and out is None:
        return None  # the per-tile case, answered in three identity checks
    if not isinstance(result, np.ndarray):
        return f"returned {type(result).__name__}, not a NumPy array"
    if result.shape != shape or result.dtype != _F32:
        return f"returned {result.dtype}{list(result.shape)}, expected float32{list(shape)}"
    if out is not None and result is not out:
        return "returned a new array instead of the out= array it was given"
    return None


def check_neighbours(result: Any, expected: tuple[int, int, int, bool]) -> str | None:
    """``(indices, distances)`` of shape ``(N,)`` for ``k=1``, ``(N, k)`` otherwise.

    The index range is checked too: an index outside the target set is the one wrong answer a shape
    check cannot see, and it would crash the caller's pairing later. ``-1`` is allowed only where a
    neighbour may be missing (``k > M`` or ``max_distance``).
    """
    n, m, k, may_miss = expected
    shape = (n,) if k == 1 else (n, k)
    if not isinstance(result, tuple) or len(result) != 2:
        return f"returned {type(result).__name__}, not an (indices, distances) pair"
    index, distance = result
    if not isinstance(index, np.ndarray) or index.dtype != _I64 or index.shape != shape:
        return f"indices are not int64 of shape {shape}"
    if not isinstance(distance, np.ndarray) or distance.dtype != _F32 or distance.shape != shape:
        return f"distances are not float32 of shape {shape}"
    if index.size and (index.min() < (-1 if may_miss else 0) or index.max() >= m):
        return f"indices fall outside the {m} target points"
    return None


def check_coordinates(result: Any, shape: tuple[int, ...]) -> str | None:
    """int64 ``(P, ndim)`` coordinates inside the field, in row-major order.

    Cheap on purpose (a few passes over P x ndim integers): 343,000 peaks of a 4096^2 field are
    checked in about 3 ms rather than 12, which is the difference between ``local_maxima`` keeping
    pace with ``maximum_filter`` or not.
    """
    if not isinstance(result, np.ndarray) or result.dtype != _I64 or result.ndim != 2 \
            or result.shape[1] != len(shape):
        return f"returned {getattr(result, 'dtype', type(result).__name__)}" \
               f"{list(getattr(result, 'shape', ()))}, expected int64 (P, {len(shape)}) coordinates"
    if result.shape[0]:
        # Column by column: a reduction along axis 0 of a (P, 2) array is ~30 times slower.
        unsigned = result.view(np.uint64)  # a negative coordinate becomes huge: one bound checks both ends
        if any(unsigned[:, axis].max() >= length for axis, length in enumerate(shape)):
            return "returned coordinates outside the field"
        strides = np.cumprod((*shape[1:], 1)[::-1])[::-1].astype(np.int64)
        flat = result @ strides
        if flat.shape[0] > 1 and not (flat[1:] > flat[:-1]).all():
            return "returned coordinates not in row-major order (or repeated)"
    return None


def check_gathered(result: Any, expected: tuple[int, int]) -> str | None:
    """float32 ``(N, F)``: one value per point and field."""
    if type(result) is np.ndarray and result.dtype is _F32 and result.shape == expected:
        return None
    return f"returned {getattr(result, 'dtype', type(result).__name__)}" \
           f"{list(getattr(result, 'shape', ()))}, expected float32{list(expected)}"


def check_correlation(result: Any, expected: tuple[int, int]) -> str | None:
    """``(peaks, ratios)``: int64 ``(B,)`` flat indices inside the field, float64 ``(B,)`` ratios.

    A peak outside the field is the wrong answer a shape check cannot see (it would unwrap to a
    shift no surface holds); a negative or NaN ratio is not a ratio of a maximum to a mean.
    """
    count, pixels = expected
    if not isinstance(result, tuple) or len(result) != 2:
        return f"returned {type(result).__name__}, not a (peaks, ratios) pair"
    peaks, ratios = result
    if not isinstance(peaks, np.ndarray) or peaks.dtype != _I64 or peaks.shape != (count,):
        return f"peaks are not int64 of shape ({count},)"
    if not isinstance(ratios, np.ndarray) or ratios.dtype != np.float64 or ratios.shape != (count,):
        return f"ratios are not float64 of shape ({count},)"
    if count and (peaks.min() < 0 or peaks.max() >= pixels):
        return "returned peaks outside the field"
    if count and not (ratios >= 0).all():
        return "returned negative or NaN ratios"
    return None


# ---- adapters ---------------------------------------------------------------------------------


def _casting(call: Call, declaration: Declaration) -> Call:
    """A camera field the plugin did not declare reaches it as float32 (read-only like any input)."""
    accepted = declaration.narrow_fields
    if accepted >= NARROW_FIELDS:
        return call
    takes = frozenset({_F32, *accepted})

    def cast(field: np.ndarray, *rest: Any) -> Any:
        if field.dtype not in takes:
            field = field.astype(_F32)
            field.setflags(write=False)
        return call(field, *rest)

    return cast


def _settling_zeros(call: Call) -> Call:
    """The contract's sign of zero: a maximum of zero is ``+0.0`` on every backend.

    Adding ``+0.0`` changes nothing else, NaN included. An integer field holds no ``-0.0`` and a
    maximum is one of its inputs, so there the pass is skipped.
    """

    def settle(field: np.ndarray, size: int, out: np.ndarray | None, *rest: Any) -> Any:
        result = call(field, size, out, *rest)
        if field.dtype.kind in "biu" or not isinstance(result, np.ndarray):  # the check judges the latter
            return result
        if result.flags.writeable and not np.may_share_memory(result, field):
            np.add(result, _ZERO, out=result)
            return result
        return result + _ZERO  # a read-only or aliased result (a careless plugin) is not written to

    return settle


def _into_out(call: Call) -> Call:
    """``out=`` for a plugin that does not take it: its fresh result copied in."""

    def into(first: Any, second: Any, out: np.ndarray | None, *rest: Any) -> Any:
        result = call(first, second, None, *rest)
        if out is None or not isinstance(result, np.ndarray) or result.shape != out.shape \
                or result.dtype != _F32:
            return result  # the check names what is wrong
        np.copyto(out, result)
        return out

    return into


def _field_by_field(call: Call) -> Call:
    """A stack ``(..., H, W)`` for a plugin that takes one field: each field in turn, into one result.

    Each field's answer is checked as a whole answer would be, and a wrong one is raised as a
    ``TypeError`` naming the field, so dispatch reports the real fault (not a later shape mismatch).
    """

    def each(field: np.ndarray, size: Any, out: np.ndarray | None, *rest: Any) -> Any:
        if field.ndim == 2:
            return call(field, size, out, *rest)
        result = np.empty(field.shape, dtype=_F32) if out is None else out
        fields = field.reshape(-1, *field.shape[-2:])
        into = result.reshape(fields.shape)
        for i in range(fields.shape[0]):
            view = into[i]
            problem = check_array(call(fields[i], size, view, *rest), (view.shape, view))
            if problem is not None:
                raise TypeError(f"field {i} of the stack: {problem}")
        return result

    return each


def adapt_filter(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                 declaration: Declaration) -> Call:
    """``maximum_filter(field, size, out)`` (and ``minimum_filter``) for one plugin."""
    call = by_position(function, argnames, spec)
    if "out" not in argnames:
        call = _into_out(call)
    if not declaration.stacks:
        call = _field_by_field(call)
    call = _casting(call, declaration)
    return call if declaration.positive_zeros else _settling_zeros(call)


def adapt_matmul(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                 declaration: Declaration) -> Call:
    """``matmul(first, second, out)`` for one plugin."""
    call = by_position(function, argnames, spec)
    return call if "out" in argnames else _into_out(call)


def adapt_neighbours(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                     declaration: Declaration) -> Call:
    """``nearest_neighbours(source, target, chunk, k, max_distance, metric)`` for one plugin.

    A plugin that does not take ``k`` or ``metric`` serves ``k=1`` and Euclidean only and declines
    the rest; one that does not take ``max_distance`` has it applied to its answer (exact: the
    bound is compared on the returned float32 distance).
    """
    call = by_position(function, argnames, spec)
    if all(name in argnames for name in ("k", "max_distance", "metric")):
        return call
    takes_k, takes_metric, prunes = ("k" in argnames), ("metric" in argnames), ("max_distance" in argnames)

    def served(source: np.ndarray, target: np.ndarray, chunk: int, k: int, max_distance: float | None,
               metric: str) -> Any:
        if k != 1 and not takes_k:
            raise BackendDeclined(f"it takes k=1 only, not k={k}")
        if metric != "euclidean" and not takes_metric:
            raise BackendDeclined(f"it takes the Euclidean metric only, not {metric!r}")
        result = call(source, target, chunk, k, max_distance, metric)
        return result if prunes or max_distance is None else beyond(result, max_distance)

    return served


def beyond(result: Any, max_distance: float) -> Any:
    """``(indices, distances)`` with every neighbour farther than ``max_distance`` made ``-1``/inf."""
    if not isinstance(result, tuple) or len(result) != 2:
        return result
    index, distance = result
    if not isinstance(index, np.ndarray) or not isinstance(distance, np.ndarray):
        return result
    far = distance > np.float64(max_distance)  # in float64, as every backend compares (NEP 50 would use float32)
    if not far.any():
        return result
    index, distance = index.copy(), distance.copy()
    index[far] = -1
    distance[far] = np.inf
    return index, distance


def _peaks_field_by_field(call: Call) -> Call:
    """Peaks of a stack for a plugin that takes one field: the leading coordinates prepended, each
    field's answer checked as a whole answer would be."""

    def each(field: np.ndarray, size: int, threshold: np.float32 | None) -> Any:
        if field.ndim == 2:
            return call(field, size, threshold)
        lead = field.shape[:-2]
        fields = field.reshape(-1, *field.shape[-2:])
        found = []
        for i in range(fields.shape[0]):
            peaks = call(fields[i], size, threshold)
            problem = check_coordinates(peaks, fields.shape[1:])
            if problem is not None:
                raise TypeError(f"field {i} of the stack: {problem}")
            where = np.asarray(np.unravel_index(i, lead), dtype=np.int64)
            found.append(np.hstack([np.broadcast_to(where, (len(peaks), len(lead))), peaks]))
        return np.concatenate(found).astype(_I64, copy=False) if found else np.empty((0, field.ndim), _I64)

    return each


def adapt_peaks(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                declaration: Declaration) -> Call:
    """``local_maxima(field, size, threshold)`` for one plugin."""
    call = by_position(function, argnames, spec)
    if not declaration.stacks:
        call = _peaks_field_by_field(call)
    return _casting(call, declaration)


# ---- the decode chain's filters (minimum, Gaussian, Laplacian of Gaussian) ---------------------


def adapt_smoothing(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                    declaration: Declaration) -> Call:
    """``gaussian_filter(field, sigma, out, truncate, mode)`` (and ``gaussian_laplace``) for one
    plugin: ``out=`` filled by a copy, a stack field by field, a camera field cast. A zero keeps
    the sign SciPy gives it."""
    call = by_position(function, argnames, spec)
    if "out" not in argnames:
        call = _into_out(call)
    if not declaration.stacks:
        call = _field_by_field(call)
    return _casting(call, declaration)


def adapt_gather(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                 declaration: Declaration) -> Call:
    """``window_maxima(stack, points, size)`` for one plugin: a camera stack it did not declare
    reaches it as float32 (the window's maximum of the cast is the cast of its maximum)."""
    return _casting(by_position(function, argnames, spec), declaration)


def adapt_plain(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                declaration: Declaration) -> Call:
    """An operation every plugin takes as the spec says (``phase_correlate``)."""
    return by_position(function, argnames, spec)


OPERATIONS: Final[Mapping[str, Operation]] = {
    op.name: op for op in (
        Operation("maximum_filter", check_array, adapt_filter, {"out": None}, "Peak finding (maximum_filter)"),
        Operation("matmul", check_array, adapt_matmul, {"out": None}, "Spectral unmixing (matmul)"),
        Operation("nearest_neighbours", check_neighbours, adapt_neighbours,
                  {"chunk": None, "k": 1, "max_distance": None, "metric": "euclidean"},
                  "Cell matching (nearest_neighbours)"),
        Operation("local_maxima", check_coordinates, adapt_peaks, {}, "Reads as coordinates (local_maxima)"),
        Operation("minimum_filter", check_array, adapt_filter, {"out": None},
                  "Background floor (minimum_filter)"),
        Operation("gaussian_filter", check_array, adapt_smoothing, {"out": None}, "Smoothing (gaussian_filter)"),
        Operation("gaussian_laplace", check_array, adapt_smoothing, {"out": None},
                  "Spot enhancement (gaussian_laplace)"),
        Operation("window_maxima", check_gathered, adapt_gather, {}, "Base intensities at reads (window_maxima)"),
        Operation("phase_correlate", check_correlation, adapt_plain, {},
                  "Cycle registration (phase_correlate)"),
    )
}
"""Every primitive, by name, in the order the doctor and the bench list them."""
