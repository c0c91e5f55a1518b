"""spaCR 1.5.1.5's ``ops_cycles._translate`` and ``ops_sbs.estimate_read_locations``, patched and not,
on the same inputs: served bit for bit (the check mode compares every served call with spaCR's own),
and passed through for what the registry does not repeat."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("spacr", reason="spaCR is not installed (pip install --no-deps spacr==1.5.1.5)")

from spacr_accel_core import patch  # after the skip: these tests need spaCR


def _seam(name: str) -> tuple[dict[str, int], dict[str, int]]:
    for seam in patch.report().seams:
        if seam.seam == name:
            return {b: n for b, n, *_ in seam.served}, {why: n for why, n, *_ in seam.passed}
    return {}, {}


def _unpatched(function_name: str, module_name: str) -> Callable[..., Any]:
    import importlib

    patch.uninstall()
    try:
        function: Callable[..., Any] = getattr(importlib.import_module(module_name), function_name)
        return function
    finally:
        patch.install(check=True)


def test_translate_is_spacrs_own_where_only_the_floor_would_serve_it(patched: None) -> None:
    """The floor's slice copies are spaCR's own copies plus the seam's checks: never slower to leave."""
    from spacr import ops_cycles

    ops_cycles._translate(np.ones((8, 9), np.float32), 1, 2)
    served, passed = _seam("spacr.ops_cycles._translate")
    assert not served and list(passed) == ["only the NumPy floor serves translate here, and spaCR's own is as fast"]


def test_translate_is_served_bit_for_bit(patched: None, usable_stand_in: Callable[..., str]) -> None:
    """Served by a backend above the floor (torch's translation, ranked first as a card would be)."""
    from spacr import ops_cycles

    from spacr_accel_torch import _plugin

    usable_stand_in(_plugin, "cardtorch", "spacr_accel_translate")

    rng = np.random.default_rng(0)
    plane = rng.normal(100, 10, size=(148, 150)).astype(np.float32)
    plane[3, 4] = np.nan
    plane[5, 6] = -0.0
    stack = np.stack([plane, plane * 2, plane - 1, plane[::-1].copy()])
    own = _unpatched("_translate", "spacr.ops_cycles")
    for image, (dy, dx) in ((plane, (3, -5)), (stack, (-14, 9)), (np.nan_to_num(plane).astype(np.uint16), (0, 0)),
                            (stack, (148, 2)), (plane, (2.9, -1.2))):
        got = ops_cycles._translate(image, dy, dx)
        assert got.dtype == image.dtype and got.tobytes() == own(image, dy, dx).tobytes()
    served, passed = _seam("spacr.ops_cycles._translate")
    assert served == {"cardtorch": 3, "core": 2} and not passed, (served, passed)  # (0, 0) and past the edge: the core


def test_translate_leaves_what_it_does_not_repeat_to_spacr(patched: None) -> None:
    from spacr import ops_cycles

    fortran = np.asfortranarray(np.arange(20.0).reshape(4, 5))
    moved = ops_cycles._translate(fortran, 1, 1)
    assert moved.flags.f_contiguous  # spaCR's zeros_like kept the layout
    ops_cycles._translate(np.ones((3, 3), complex), 1, 0)
    _, passed = _seam("spacr.ops_cycles._translate")
    assert sum(passed.values()) == 2


def test_the_read_score_is_served_bit_for_bit(patched: None) -> None:
    from spacr import ops_sbs

    rng = np.random.default_rng(1)
    stack = (rng.normal(100, 30, size=(11, 4, 60, 70)) ** 2).astype(np.float32)
    stack[2, 1, 10, 10] = np.nan
    own = _unpatched("estimate_read_locations", "spacr.ops_sbs")
    for data in (stack, stack[:1], stack.astype(np.float64), np.ascontiguousarray(stack[:, :, :1, :1])):
        got = ops_sbs.estimate_read_locations(data)
        assert got.tobytes() == own(data).tobytes()
    served, passed = _seam("spacr.ops_sbs.estimate_read_locations")
    # the two stacks holding the NaN make a NaN score: which NaN (its sign) is spaCR's NumPy's to say
    assert sum(served.values()) == 2 and sum(passed.values()) == 2
    ops_sbs.estimate_read_locations(np.swapaxes(stack, 2, 3))  # not C-ordered: spaCR's own
    with pytest.raises(ValueError, match="cycles, channels"):
        ops_sbs.estimate_read_locations(stack[0])  # spaCR's own error for its own bad input
    _, passed = _seam("spacr.ops_sbs.estimate_read_locations")
    assert sum(passed.values()) == 4
