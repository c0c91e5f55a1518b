"""A ``max_distance`` above every distance, however large (its square beyond float64, or itself
beyond float64), is no bound on CuPy's algorithms: run here on the NumPy kit standing in for the
card, forced and chosen automatically, the answer equals the unbounded call's and the backend is
still healthy afterwards (a raised overflow would set it aside for the rest of the process)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import last_dispatch, ops, use
from spacr_accel_cupy import _kit, _plugin, _runtime

HUGE_BOUNDS: list[Any] = [
    np.finfo(np.float64).max,
    float(np.finfo(np.float32).max),
    1e300,
    10**400,
    np.float64(1e300),
    np.longdouble(1e300),
]
BOUND_IDS = ["float64_max", "float32_max", "1e300", "10**400", "np.float64(1e300)", "np.longdouble(1e300)"]

_RNG = np.random.default_rng(12)
_LATTICE = _RNG.integers(0, 6, (120, 3)).astype(np.float32)
_VAST = (_RNG.standard_normal((80, 2)) * 1e20).astype(np.float32)
POINTS = [
    (_RNG.random((300, 2)).astype(np.float32), _RNG.random((500, 2)).astype(np.float32)),
    (_LATTICE, _LATTICE[::-1].copy()),
    (_VAST, _VAST[::2].copy()),
]
BITS = _RNG.integers(0, 256, (90, 32), dtype=np.uint8)


def _healthy(name: str) -> None:
    status = {plugin.name: plugin for plugin in spacr_accel_core.plugins()}[name]
    assert status.status != "faulty" and status.faults == (), status


def _calls(bound: Any, k: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(bounded, unbounded)`` keyword sets: the point sets, then Hamming descriptors."""
    sets = [{"source": s, "target": t, "k": k} for s, t in POINTS]
    sets.append({"source": BITS, "target": BITS[::-1].copy(), "k": k, "metric": "hamming"})
    return [({**kw, "max_distance": bound}, kw) for kw in sets]


@pytest.fixture
def kit_card(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runtime, "cupy_kit", _kit.numpy_kit)


@pytest.fixture
def chosen_cupy(kit_card: None, usable_stand_in: Callable[..., str]) -> str:
    """CuPy's nearest neighbours under a plugin that claims a usable card, so the dispatcher picks
    it without being told."""
    return usable_stand_in(_plugin, "boundcupy", "spacr_accel_nearest_neighbours")


@pytest.mark.parametrize("bound", HUGE_BOUNDS, ids=BOUND_IDS)
@pytest.mark.parametrize("k", [1, 3])
def test_a_forced_huge_bound_is_no_bound(bound: Any, k: int, kit_card: None) -> None:
    for bounded, unbounded in _calls(bound, k):
        want = ops.nearest_neighbours(**unbounded, backend="cupy")
        got = ops.nearest_neighbours(**bounded, backend="cupy")
        dispatch = last_dispatch()
        assert dispatch is not None and dispatch.backend == "cupy" and dispatch.declined == (), dispatch
        for part, expected in zip(got, want, strict=True):
            np.testing.assert_array_equal(part, expected)
        _healthy("cupy")
        ops.nearest_neighbours(**{**bounded, "max_distance": 1.0}, backend="cupy")
        assert last_dispatch().backend == "cupy"  # type: ignore[union-attr]  # a call just ran


@pytest.mark.parametrize("bound", HUGE_BOUNDS, ids=BOUND_IDS)
@pytest.mark.parametrize("k", [1, 3])
def test_an_automatic_huge_bound_is_no_bound(bound: Any, k: int, chosen_cupy: str) -> None:
    with use(chosen_cupy, "numpy"):
        for bounded, unbounded in _calls(bound, k):
            want = ops.nearest_neighbours(**unbounded)
            got = ops.nearest_neighbours(**bounded)
            dispatch = last_dispatch()
            assert dispatch is not None and dispatch.backend == chosen_cupy and dispatch.declined == (), dispatch
            for part, expected in zip(got, want, strict=True):
                np.testing.assert_array_equal(part, expected)
            _healthy(chosen_cupy)
            ops.nearest_neighbours(**{**bounded, "max_distance": 1.0})
            assert last_dispatch().backend == chosen_cupy  # type: ignore[union-attr]  # a call just ran
