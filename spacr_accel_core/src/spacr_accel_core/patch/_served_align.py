"""How the patch serves ``spacr.ops_cycles.align_field``: spaCR's registrations, every one of them
through spaCR's own functions (and so through the seams), with the field's pixels copied twice
instead of four times on the way to the answer.

WHY A SEAM AROUND THE REGISTRATIONS. spaCR's ``align_field`` moves an 11-cycle x 4-channel
1480 x 1480 field's pixels through four copies: each channel's ``_translate`` onto its cycle's first
channel (33 copies of 8.8 MB), each cycle's ``np.stack`` of its channels (11 arrays of 35 MB), each
cycle's ``_translate`` onto the reference (10 more of 35 MB) and the final ``np.stack`` of the
cycles (385 MB): 1.4 GB a field, each array above glibc's 32 MiB mapping threshold a new mapping
whose pages the kernel zeroes and faults in one by one. This seam moves each channel into a plane
of its own, as ``_translate`` does (a channel that does not move is used as it is: spaCR's copy of
it holds the same values), and after the cycle registrations moves each cycle's planes straight
into the answer. A decode's peak memory is 795 MiB instead of 1,136 MiB (``tracemalloc`` over
spaCR's ``_decode_field`` of such a field, patched with and without this seam; maximum resident
1,562 MiB against 1,879 MiB).

THE ANSWER'S PAGES, TAKEN FIRST. The answer (385 MB) is allocated, and one byte of each of its
pages written, before the first registration, not after the last: at that moment the arrays of
the field before (its answer and spaCR's filtered stack) have just been freed. A virtual machine
whose host takes back guest memory left free for a few seconds (free page reporting) makes a page
faulted after that cost far more than one faulted at once: in fresh processes of four decodes,
alternating, the later fields' median was 3.89, 3.95 and 3.32 s against 5.01, 4.56 and 4.25 s
with the answer allocated at the end. Elsewhere a page costs the same whenever it is faulted, and
the early writes are one byte a page.

TWO SHAPES TRIED FIRST. All the moved channels in one array of every cycle, the answer apart:
each call a fresh 385 MB mapping, and a field whose cycles were refused still paid for all of them
(a stack of noise, 10 of its 11 cycles refused: 3.3 s against spaCR's 2.6 s). Every cycle
moved in that array's place, the array the answer: one copy fewer, but spaCR's spot step, which
allocates an array of the field's size right after the alignment, then had to fault in pages no
process had used for seconds (on a virtual machine, 0.3 s a field became 0.5 to 1.4 s).

WHAT STAYS spaCR's. Every registration is a call of the module's own ``_clipped``,
``phase_correlate``, ``sbs_mean_target``, ``register_cycles`` and ``accepted_cycles``, with spaCR's
arguments, in spaCR's order (all channel registrations, cycle by cycle, then the targets, then the
cycles), so each is served or left to spaCR by its own seam and counted there. What the seam does
itself is what spaCR's ``_translate`` does (a whole-pixel move with zero fill, the pixels' bits as
they are) and what its ``np.stack`` does.

WHAT IS LEFT TO spaCR: any field its own code would read otherwise, or refuse: planes that are not
a mapping with integer cycles, a plane that is not a plain non-empty 2-D ndarray of real numbers,
planes or cycles of different shapes or channel counts (spaCR's ``np.stack`` raises), no usable
cycle, or a reference that has no planes (spaCR raises, with its own message).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from ._layout import common_order
from ._outcome import PassThrough

__all__ = ["align_field"]

_PAGE = 4096
"""Bytes between the writes that take an array's pages from the kernel (one write a page)."""

_SPACRS: Any = object()
"""Marks an argument not given: spaCR's own default, read off its function at the call."""


def _place(out: np.ndarray, image: np.ndarray, dy: int, dx: int) -> None:
    """``out`` = spaCR's ``_translate(image, dy, dx)``: ``image`` moved ``dy`` rows down and ``dx``
    columns right, the gap zero, each pixel's bits as they are (``image`` has ``out``'s dtype)."""
    height, width = out.shape
    if abs(dy) >= height or abs(dx) >= width:
        out.fill(0)
        return
    top, bottom = max(dy, 0), height + min(dy, 0)
    left, right = max(dx, 0), width + min(dx, 0)
    out[top:bottom, left:right] = image[max(-dy, 0):height + min(-dy, 0), max(-dx, 0):width + min(-dx, 0)]
    out[:top] = 0
    out[bottom:] = 0
    out[top:bottom, :left] = 0
    out[top:bottom, right:] = 0


def _readable_tolerance(value: Any, name: str) -> None:
    """A pass-through, before any registration, for a tolerance spaCR's ``phase_correlate`` would
    raise on (it reads an ``int`` or ``float``, or unpacks a pair, after its surface): raised in the
    middle of the field, it would send the call to spaCR with the registrations before it made
    twice, and their warnings given twice."""
    if value is None or isinstance(value, (int, float)):
        return
    pair = isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.shape == (2,))
    if not (pair and len(value) == 2 and all(isinstance(item, numbers.Real) for item in value)):
        raise PassThrough(f"{name}={value!r} (spaCR's phase_correlate reads a number or a pair of numbers)")


def _usable(planes: Any) -> tuple[dict[int, list[np.ndarray]], list[int], tuple[int, int, int], str]:
    """spaCR's split of the offered cycles into usable and missing, the common ``(channels, Y, X)`` and
    the planes' one memory order (:mod:`._layout`), or a pass-through where spaCR's own code would
    read the planes otherwise, or make its stack in a mix of orders."""
    if not isinstance(planes, Mapping):
        raise PassThrough("planes that are not a mapping of cycles")
    if not all(isinstance(cycle, numbers.Integral) and not isinstance(cycle, bool) for cycle in planes):
        raise PassThrough("a cycle that is not an integer")
    usable: dict[int, list[np.ndarray]] = {}
    missing: list[int] = []
    for cycle in sorted(planes):
        offered = planes[cycle]
        if offered is None or len(offered) == 0 or any(plane is None for plane in offered):
            missing.append(int(cycle))
        else:
            usable[int(cycle)] = list(offered)
    if not usable:
        raise PassThrough("no cycle has planes (spaCR raises)")
    layout: set[tuple[int, int, int]] = set()
    for offered in usable.values():
        for plane in offered:
            if type(plane) is not np.ndarray or plane.dtype.kind not in "biuf" or plane.ndim != 2:
                raise PassThrough("a plane that is not a plain 2-D ndarray of real numbers")
        layout.update((len(offered), *plane.shape) for plane in offered)
    if len(layout) != 1:
        raise PassThrough("cycles or planes of different shapes (spaCR's np.stack raises)")
    shape = layout.pop()
    if not shape[1] * shape[2]:
        raise PassThrough("empty planes (spaCR's percentile raises)")
    order = common_order(plane for offered in usable.values() for plane in offered)
    if order is None:
        raise PassThrough("planes in C and in Fortran order (the order of spaCR's stacks is NumPy's mix)")
    return usable, missing, shape, order


def _channels_moved(usable: dict[int, list[np.ndarray]], module: ModuleType, gpu: Any) -> tuple[
        dict[int, list[np.ndarray]], dict[int, tuple[tuple[int, int], ...]], list[tuple[int, int]]]:
    """Each cycle's channels registered on its first channel by spaCR's own calls, in spaCR's order,
    and moved there: ``(moved planes, channel shifts, refused (cycle, channel) pairs)``."""
    clipped, correlate = module._clipped, module.phase_correlate
    moved: dict[int, list[np.ndarray]] = {}
    channel_shifts: dict[int, tuple[tuple[int, int], ...]] = {}
    refused_channels: list[tuple[int, int]] = []
    for cycle, offered in usable.items():
        first = np.asarray(offered[0], dtype=np.float32)
        base = clipped(first)
        layers, shifts = [first], [(0, 0)]
        for channel, given in enumerate(offered[1:], start=1):
            plane = np.asarray(given, dtype=np.float32)
            found = correlate(base, clipped(plane), expected=(0, 0), tolerance=module._CHANNEL_TOLERANCE, gpu=gpu)
            shift = (int(found.dy), int(found.dx)) if found.accepted else (0, 0)
            if not found.accepted:
                refused_channels.append((cycle, channel))
            if shift != (0, 0):
                layer = np.empty_like(plane)  # the plane's order, as spaCR's np.zeros_like keeps it
                _place(layer, plane, *shift)
                plane = layer
            layers.append(plane)
            shifts.append(shift)
        moved[cycle] = layers
        channel_shifts[cycle] = tuple(shifts)
    return moved, channel_shifts, refused_channels


def _answer(cycles: int, channels: int, height: int, width: int, order: str) -> np.ndarray:
    """The ``(cycles, channels, Y, X)`` float32 answer as spaCR's ``np.stack`` lays it out: cycles and
    channels outermost, each plane in its planes' order (columns first for Fortran-ordered planes)."""
    if order == "F":
        return np.empty((cycles, channels, width, height), np.float32).transpose(0, 1, 3, 2)
    return np.empty((cycles, channels, height, width), np.float32)


def align_field(planes: Any, *, reference: Any = None, tolerance: Any = _SPACRS, gpu: Any = True,
                original: Callable[..., Any], module: ModuleType) -> tuple[Any, str]:
    """``spacr.ops_cycles.align_field``: spaCR's registrations, the pixels moved into place (see above).

    :param module: ``spacr.ops_cycles``, whose functions (patched or not) register the field.
    :returns: spaCR's ``AlignedField``, and ``"core"``: the moves are the core's own.
    """
    if tolerance is _SPACRS:
        tolerance = (original.__kwdefaults__ or {})["tolerance"]
    _readable_tolerance(tolerance, "tolerance")
    _readable_tolerance(module._CHANNEL_TOLERANCE, "_CHANNEL_TOLERANCE")
    usable, missing, (channels, height, width), order = _usable(planes)
    if reference is None:
        reference = min(usable)
    if reference not in usable:
        raise PassThrough("the reference cycle has no planes (spaCR raises)")

    # the answer's pages taken now, while the field before's arrays have just been freed (see above)
    stack = _answer(len(usable), channels, height, width, order)
    stack.ravel(order="K").view(np.uint8)[::_PAGE] = 0  # a view in either order
    moved, channel_shifts, refused_channels = _channels_moved(usable, module, gpu)
    target = module.sbs_mean_target(moved[reference])
    others = {cycle: module.sbs_mean_target(moved[cycle]) for cycle in usable if cycle != reference}
    registrations = module.register_cycles(target, others, tolerance=tolerance, gpu=gpu)
    kept = sorted([reference, *module.accepted_cycles(registrations)])
    cycle_shifts: dict[Any, tuple[int, int]] = {reference: (0, 0)}
    for cycle in kept:
        if cycle != reference:
            found = registrations[cycle]
            cycle_shifts[cycle] = (int(found.dy), int(found.dx))

    if len(kept) < len(usable):  # refused cycles: an answer of the kept ones alone, in the pages just freed
        del stack
        stack = _answer(len(kept), channels, height, width, order)
    for index, cycle in enumerate(kept):
        for channel, layer in enumerate(moved[cycle]):
            _place(stack[index, channel], layer, *cycle_shifts[cycle])
    refused = tuple(sorted(cycle for cycle, found in registrations.items() if not found.accepted))
    answer = module.AlignedField(stack=stack, kept=tuple(kept), refused=refused, missing=tuple(missing),
                                 channel_shifts=channel_shifts, cycle_shifts=cycle_shifts,
                                 refused_channels=tuple(refused_channels))
    return answer, "core"
