"""The bench's table fits a 100-column terminal, and its progress counts only steps that run."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

import numpy as np
import pytest

from spacr_accel_core import BackendInfo, BackendUnavailable, Declaration, hookimpl
from spacr_accel_core.commands import _bench
from spacr_accel_core.operations._results import agree_field, agree_nearest, agree_product

Plug = Callable[[object, str], object]


class Decliner:
    """Declines every operation, as CuPy does without a card."""

    SPACR_ACCEL_PLUGIN = Declaration(name="decliner", priority=1.0)

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo()

    @hookimpl
    def spacr_accel_matmul(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        raise BackendUnavailable("cupy cannot reach a CUDA device: no NVIDIA driver is loaded here "
                                 "(no /dev/nvidiactl or /proc/driver/nvidia), and a very long tail "
                                 "of words a driver might add to make the reason wrap twice")


def _tiny_cases(quick: bool, seed: int = 0) -> list[_bench.Case]:
    """The real cases' operations and comparisons on inputs small enough for a unit test."""
    rng = np.random.default_rng(seed)
    field = rng.standard_normal((16, 16)).astype(np.float32)
    first = rng.standard_normal((8, 4)).astype(np.float32)
    points = rng.uniform(0, 8, size=(20, 2)).astype(np.float32)
    return [
        _bench.Case("maximum_filter", "16x16 float32, size 3", (field, 3), agree_field),
        _bench.Case("matmul", "(8 x 4) @ (4 x 4) float32", (first, first[:4]), agree_product),
        _bench.Case("nearest_neighbours", "N = M = 20, D = 2", (points, points[::-1].copy()),
                    agree_nearest),
    ]


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bench, "cases", _tiny_cases)


@pytest.mark.usefixtures("tiny")
def test_progress_does_not_count_the_repeats_of_a_skipped_backend(plug: Plug) -> None:
    plug(Decliner(), "decliner")
    stream = io.StringIO()
    report = _bench.run(quick=True, repeat=3, backends=["decliner"], progress=stream)
    assert all(row["status"] == "skipped" for op in report["operations"] for row in op["results"]
               if row["backend"] == "decliner")
    counters = re.findall(r"bench \[(\d+)/(\d+)\] ([^\r]*)", stream.getvalue())
    # per operation: numpy's warm-up and 3 repeats, the decliner's warm-up only
    assert len(counters) == 3 * (2 + 3)
    done, total, _ = counters[-1]
    assert done == total == str(3 * (2 + 3))
    assert not any("decliner, repeat" in text for *_, text in counters)


@pytest.mark.usefixtures("tiny")
def test_every_line_of_the_table_fits_100_columns(plug: Plug) -> None:
    plug(Decliner(), "decliner")
    report = _bench.run(quick=True, repeat=1, backends=["decliner"])
    text = _bench.render(report)
    assert "no NVIDIA driver is loaded here" in text.replace("\n", " ")
    widths = [len(line) for line in text.splitlines()]
    assert max(widths) <= _bench.WIDTH == 100
    # the wrapped reason continues under its own column, not at the left margin
    detail_column = text.splitlines()[4].index("detail")
    continued = [line for line in text.splitlines() if line.startswith(" " * detail_column) and line.strip()]
    assert continued


def test_the_real_table_with_its_inputs_fits_100_columns() -> None:
    report = {"quick": False, "repeat": 5, "order": ["torch", "cupy", "numpy"], "problems": ["torch in matmul"],
              "operations": [{"operation": case.operation, "input": case.label, "results": [
                  {"backend": "numpy", "status": "ok", "agrees": True, "best_s": 0.01234, "speedup": 1.0,
                   "reason": "", "detail": "bit-identical"},
                  {"backend": "torch", "status": "ok", "agrees": False, "best_s": 1234.5, "speedup": 0.00001,
                   "reason": "", "detail": "1234567 indices and 1234567 distances of 100000 differ"}]}
                  for case in _bench.cases(quick=False)]}
    text = _bench.render(report)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "N = M = 100,000, D = 2, in a 2048 box" in text
