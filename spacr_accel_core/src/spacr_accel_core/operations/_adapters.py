"""How each plugin's implementation is called, whatever it declares: the spec's arguments by position,
``out=`` filled by a copy, a stack handed over one field at a time, a camera field cast, the sign
of zero settled, ``max_distance`` applied. An operation's table entry names its adapter; a plugin
that needs none of it is called as it is (the hot path stays bare)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..contract._declaration import NARROW_FIELDS, Declaration
from ..contract._errors import BackendDeclined
from ._checks import _F32, _I64, _ZERO
from ._results import check_array, check_coordinates

Call = Callable[..., Any]
Adapter = Callable[[Call, tuple[str, ...], tuple[str, ...], Declaration, str], Call]


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


def adapt_plain(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                declaration: Declaration, operation: str) -> Call:
    """An operation with nothing to adapt (every plugin takes its stacks and points as the core
    passes them: the translation, the spot score, the point and level operations): by position."""
    return by_position(function, argnames, spec)


def _casting(call: Call, declaration: Declaration, operation: str) -> Call:
    """A camera field the plugin did not declare reaches it as float32 (read-only like any input)."""
    accepted = declaration.narrow_fields(operation)
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
                 declaration: Declaration, operation: str) -> Call:
    """``maximum_filter(field, size, out)`` (and ``minimum_filter``) for one plugin."""
    call = by_position(function, argnames, spec)
    if "out" not in argnames:
        call = _into_out(call)
    if not declaration.holds("stacks", operation):
        call = _field_by_field(call)
    call = _casting(call, declaration, operation)
    return call if declaration.holds("positive_zeros", operation) else _settling_zeros(call)


def adapt_matmul(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                 declaration: Declaration, operation: str) -> Call:
    """``matmul(first, second, out)`` for one plugin."""
    call = by_position(function, argnames, spec)
    return call if "out" in argnames else _into_out(call)


def adapt_neighbours(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                     declaration: Declaration, operation: str) -> Call:
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
                declaration: Declaration, operation: str) -> Call:
    """``local_maxima(field, size, threshold)`` for one plugin."""
    call = by_position(function, argnames, spec)
    if not declaration.holds("stacks", operation):
        call = _peaks_field_by_field(call)
    return _casting(call, declaration, operation)


# ---- the decode chain's filters (minimum, Gaussian, Laplacian of Gaussian) ---------------------


def adapt_smoothing(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                    declaration: Declaration, operation: str) -> Call:
    """``gaussian_filter(field, sigma, out, truncate, mode)`` (and ``gaussian_laplace``) for one
    plugin: ``out=`` filled by a copy, a stack field by field, a camera field cast. A zero keeps
    the sign SciPy gives it."""
    call = by_position(function, argnames, spec)
    if "out" not in argnames:
        call = _into_out(call)
    if not declaration.holds("stacks", operation):
        call = _field_by_field(call)
    return _casting(call, declaration, operation)


def adapt_gather(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                 declaration: Declaration, operation: str) -> Call:
    """``window_maxima(stack, points, size)`` for one plugin: a camera stack it did not declare
    reaches it as float32 (the window's maximum of the cast is the cast of its maximum)."""
    return _casting(by_position(function, argnames, spec), declaration, operation)


def adapt_correlation(function: Call, argnames: tuple[str, ...], spec: tuple[str, ...],
                      declaration: Declaration, operation: str) -> Call:
    """``phase_correlate(first, second, pairing)`` for one plugin: one that does not take ``pairing``
    receives one reference field per pair (``first[pairing]``), as the pairs were before sharing."""
    call = by_position(function, argnames, spec)
    if "pairing" in argnames:
        return call

    def one_each(first: np.ndarray, second: np.ndarray, pairing: np.ndarray) -> Any:
        if pairing.shape[0] != first.shape[0] or bool(np.any(pairing != np.arange(first.shape[0]))):
            first = first[pairing]
            first.setflags(write=False)
        return call(first, second, pairing)

    return one_each
