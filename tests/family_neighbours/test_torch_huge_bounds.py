"""A ``max_distance`` above every distance, however large, is no bound: the answer equals the
unbounded call's on the floor, numba and torch (forced, on the CPU and with ``gpu=False``, and
chosen automatically), and the backend is still healthy afterwards.

The bounds include values whose square is beyond float64 (``1e300``, float64's maximum): a search
that squares its bound must not overflow there, since a raised ``OverflowError`` is a broken
contract the registry answers by setting the backend aside for the rest of the process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import spacr_accel_core
import spacr_accel_numba
from spacr_accel_core import last_dispatch, ops, use
from spacr_accel_torch import _plugin, _runtime

HUGE_BOUNDS: list[Any] = [
    np.finfo(np.float64).max,
    float(np.finfo(np.float32).max),
    1e300,
    10**400,
    np.float64(1e300),
    np.longdouble(1e300),
]
"""Every one above every float32 distance; ``10**400`` is beyond float64 itself."""
BOUND_IDS = ["float64_max", "float32_max", "1e300", "10**400", "np.float64(1e300)", "np.longdouble(1e300)"]


def _points() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(11)
    plain = (rng.random((300, 2)).astype(np.float32), rng.random((500, 2)).astype(np.float32))
    lattice = rng.integers(0, 6, (120, 3)).astype(np.float32)  # ties and copies everywhere
    # Squares beyond float32: the torch search runs in float64 there.
    vast = (rng.standard_normal((80, 2)) * 1e20).astype(np.float32)
    return [plain, (lattice, lattice[::-1].copy()), (vast, vast[::2].copy())]


POINTS = _points()


def _healthy(name: str) -> None:
    status = {plugin.name: plugin for plugin in spacr_accel_core.plugins()}[name]
    assert status.status != "faulty" and status.faults == (), status


def _same(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    for part, expected in zip(got, want, strict=True):
        np.testing.assert_array_equal(part, expected)


@pytest.fixture(scope="module", autouse=True)
def _numba_compiled() -> None:
    # Until its kernels are compiled numba declines and the floor answers: the test would check the floor.
    assert spacr_accel_numba.warm(timeout=600), spacr_accel_numba.failure()


@pytest.fixture
def on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced torch calls on the CPU device even on a machine with a GPU."""
    monkeypatch.setattr(_runtime, "target", lambda: _runtime.Device(torch.device("cpu"), True))


@pytest.fixture
def chosen_torch(on_the_cpu: None, usable_stand_in: Callable[..., str]) -> str:
    """torch's nearest neighbours under a plugin that claims a usable device (this CPU), so the
    dispatcher picks it without being told."""
    return usable_stand_in(_plugin, "boundtorch", "spacr_accel_nearest_neighbours")


@pytest.mark.parametrize("bound", HUGE_BOUNDS, ids=BOUND_IDS)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize(("backend", "gpu"), [("numpy", True), ("numba", False), ("torch", True),
                                              ("torch", False)])
def test_a_forced_huge_bound_is_no_bound(bound: Any, k: int, backend: str, gpu: bool, on_the_cpu: None) -> None:
    for source, target in POINTS:
        want = ops.nearest_neighbours(source, target, k=k, backend=backend, gpu=gpu)
        got = ops.nearest_neighbours(source, target, k=k, max_distance=bound, backend=backend, gpu=gpu)
        _same(got, want)
        assert last_dispatch().backend == backend  # type: ignore[union-attr]  # a call just ran
        _healthy(backend)
        again = ops.nearest_neighbours(source, target, k=k, max_distance=1.0, backend=backend, gpu=gpu)
        assert last_dispatch().backend == backend  # type: ignore[union-attr]  # a call was just made, so last_dispatch() holds its record
        assert again[0].shape == want[0].shape


@pytest.mark.parametrize("bound", HUGE_BOUNDS, ids=BOUND_IDS)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("backend", ["numpy", "numba", "torch"])
def test_an_automatic_huge_bound_is_no_bound(bound: Any, k: int, backend: str, chosen_torch: str) -> None:
    name = chosen_torch if backend == "torch" else backend
    with use(name, "numpy"):
        for source, target in POINTS:
            want = ops.nearest_neighbours(source, target, k=k)
            got = ops.nearest_neighbours(source, target, k=k, max_distance=bound)
            dispatch = last_dispatch()
            assert dispatch is not None and dispatch.backend == name and dispatch.declined == (), dispatch
            _same(got, want)
            _healthy(name)
            ops.nearest_neighbours(source, target, k=k, max_distance=0.5)
            assert last_dispatch().backend == name  # type: ignore[union-attr]  # a call just ran


@pytest.mark.parametrize("bound", HUGE_BOUNDS, ids=BOUND_IDS)
@pytest.mark.parametrize("k", [1, 3])
def test_a_huge_hamming_bound_is_no_bound(bound: Any, k: int, on_the_cpu: None) -> None:
    bits = np.random.default_rng(5).integers(0, 256, (90, 32), dtype=np.uint8)
    want = ops.nearest_neighbours(bits, bits[::-1], k=k, metric="hamming", backend="numpy")
    for backend in ("numba", "torch"):
        got = ops.nearest_neighbours(bits, bits[::-1], k=k, metric="hamming", max_distance=bound, backend=backend)
        _same(got, want)
        _healthy(backend)
