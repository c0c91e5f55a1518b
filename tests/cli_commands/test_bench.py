"""``spacr-accel bench``: every backend that runs, checked against NumPy, wrong answers caught."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import BackendInfo, BackendUnavailable, PluginFault, _bench, _cli, hookimpl

OPERATIONS = ["maximum_filter", "matmul", "nearest_neighbours"]
RESULT_KEYS = {"backend", "status", "reason", "agrees", "detail", "warmup_s", "best_s", "times_s", "speedup"}


class Liar:
    """Right shapes and dtypes, wrong values: only the agreement check can catch it."""

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo(name="liar", priority=1.0, accelerated=False)

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        return field + np.float32(1.0)

    @hookimpl
    def spacr_accel_matmul(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.zeros((first.shape[0], second.shape[1]), dtype=np.float32)

    @hookimpl
    def spacr_accel_nearest_neighbours(self, source: np.ndarray, target: np.ndarray,
                                       chunk: int) -> tuple[np.ndarray, np.ndarray]:
        n = source.shape[0]
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.float32)


class Decliner:
    """Says "not me, not now" for every operation, as CuPy does without a card."""

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo(name="decliner", priority=1.0, accelerated=False)

    @hookimpl
    def spacr_accel_matmul(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        raise BackendUnavailable("no device here")


class Breaker:
    """Breaks the contract two ways: a wrong shape, and an exception that is not a RuntimeError."""

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo(name="breaker", priority=1.0, accelerated=False)

    @hookimpl
    def spacr_accel_matmul(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.zeros(3, dtype=np.float32)

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        raise TypeError("a bug in the plugin")


def bench_json(capsys: pytest.CaptureFixture[str], *argv: str, code: int) -> dict[str, Any]:
    assert _cli.main(["bench", "--quick", "--json", *argv]) == code
    captured = capsys.readouterr()
    assert "\r" not in captured.err  # no progress line under --json
    report: dict[str, Any] = json.loads(captured.out)
    return report


def results(report: dict[str, Any], backend: str) -> dict[str, dict[str, Any]]:
    """operation -> the row of ``backend`` in it."""
    return {op["operation"]: row for op in report["operations"] for row in op["results"]
            if row["backend"] == backend}


def test_quick_json_agrees_for_numpy_and_torch(capsys: pytest.CaptureFixture[str]) -> None:
    report = bench_json(capsys, code=0)
    assert set(report) == {"schema_version", "quick", "repeat", "order", "operations", "ok", "problems"}
    assert report["ok"] is True and report["problems"] == []
    assert all(set(row) == RESULT_KEYS for op in report["operations"] for row in op["results"])
    assert [op["operation"] for op in report["operations"]] == OPERATIONS
    numpy = results(report, "numpy")
    for operation in OPERATIONS:
        assert numpy[operation]["status"] == "ok"
        assert numpy[operation]["agrees"] is True
        assert numpy[operation]["speedup"] == 1.0
        assert len(numpy[operation]["times_s"]) == report["repeat"] == 3
        assert numpy[operation]["best_s"] == min(numpy[operation]["times_s"])
    torch_row = {r.name: r for r in spacr_accel_core.plugins()}.get("torch")
    if torch_row is None or not torch_row.operations:
        pytest.skip("the torch backend is not installed or implements no operation yet")
    torch = results(report, "torch")
    for operation in torch_row.operations:
        assert torch[operation]["status"] == "ok", torch[operation]["reason"]
        assert torch[operation]["agrees"] is True, torch[operation]["detail"]
        assert torch[operation]["speedup"] > 0
    for row in results(report, "cupy").values():  # no card here: declined with a reason, or right
        assert (row["status"] == "skipped" and row["reason"]) or row["agrees"] is True


def test_a_backend_with_wrong_values_is_reported_as_disagreeing(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(Liar(), "liar")
    report = bench_json(capsys, "--backend", "liar", "--repeat", "1", code=1)
    assert report["ok"] is False
    assert report["problems"] == [f"liar in {op}" for op in OPERATIONS]
    assert [r["backend"] for op in report["operations"] for r in op["results"]] == ["numpy", "liar"] * 3
    liar = results(report, "liar")
    for operation in OPERATIONS:
        assert liar[operation]["status"] == "ok"
        assert liar[operation]["agrees"] is False
        assert results(report, "numpy")[operation]["agrees"] is True
    assert "pixels differ" in liar["maximum_filter"]["detail"]
    assert "relative error 1.0e+00" in liar["matmul"]["detail"]
    assert "indices and" in liar["nearest_neighbours"]["detail"]

    assert _cli.main(["bench", "--quick", "--backend", "liar", "--repeat", "1"]) == 1
    text = capsys.readouterr().out
    assert "PROBLEMS: liar in maximum_filter" in text
    liar_lines = [line for line in text.splitlines() if " liar " in line and not line.startswith("PROBLEMS")]
    assert len(liar_lines) == 3 and all(" NO " in line for line in liar_lines)


def test_a_declining_backend_is_skipped_with_its_reason(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(Decliner(), "decliner")
    report = bench_json(capsys, "--backend", "decliner", "--repeat", "1", code=0)
    decliner = results(report, "decliner")
    assert decliner["matmul"]["status"] == "skipped"
    assert decliner["matmul"]["reason"] == "BackendUnavailable: no device here"
    assert decliner["maximum_filter"]["status"] == "skipped"
    assert "does not implement maximum_filter" in decliner["maximum_filter"]["reason"]
    assert decliner["matmul"]["agrees"] is None and decliner["matmul"]["best_s"] is None


def test_a_backend_that_breaks_the_contract_is_faulty(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(Breaker(), "breaker")
    report = bench_json(capsys, "--backend", "breaker", "--repeat", "1", code=1)
    breaker = results(report, "breaker")
    assert breaker["matmul"]["status"] == "faulty"
    assert breaker["maximum_filter"]["status"] == "faulty"
    assert breaker["maximum_filter"]["reason"].startswith("PluginFault: backend 'breaker' broke")
    assert breaker["maximum_filter"]["reason"].endswith("raised TypeError: a bug in the plugin")
    assert set(report["problems"]) == {"breaker in matmul", "breaker in maximum_filter"}


def test_an_unknown_backend_is_a_usage_error_listing_what_is_installed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _cli.main(["bench", "--json", "--backend", "nosuchbackend", "--repeat", "1"])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert "nosuchbackend" in error and "installed: " in error and "numpy" in error


def test_how_each_call_is_classified() -> None:
    def raise_(exc: BaseException) -> Callable[[], Any]:
        def call() -> Any:
            raise exc

        return call

    assert _bench._attempt(lambda: 42)[:3] == ("ok", "", 42)
    assert _bench._attempt(raise_(BackendUnavailable("gone")))[:2] == ("skipped", "BackendUnavailable: gone")
    assert _bench._attempt(raise_(MemoryError()))[:2] == ("skipped", "MemoryError")
    assert _bench._attempt(raise_(PluginFault("bad shape")))[:2] == ("faulty", "PluginFault: bad shape")
    assert _bench._attempt(raise_(KeyError("x")))[:2] == ("error", "KeyError: 'x'")


def test_agreement_rules() -> None:
    field = np.array([[1.0, np.nan], [3.0, 4.0]], dtype=np.float32)
    assert _bench._compare_field(field, field.copy()) == (True, "bit-identical")
    other = field.copy()
    other[1, 1] = np.nextafter(np.float32(4.0), np.float32(5.0))
    assert _bench._compare_field(field, other) == (False, "1 of 4 pixels differ")
    other = field.copy()
    other[0, 1] = 2.0  # a number where NumPy has NaN
    assert _bench._compare_field(field, other)[0] is False
    assert _bench._compare_field(field, field.astype(np.float64))[0] is False

    product = np.array([[1000.0, 1.0]], dtype=np.float32)
    assert _bench._compare_product(product, product + np.float32(1e-3))[0] is True
    assert _bench._compare_product(product, product * np.float32(1.001))[0] is False
    assert _bench._compare_product(product, np.full_like(product, np.nan))[0] is False

    index, distance = np.array([0, 1]), np.array([1.0, 2.0], dtype=np.float32)
    assert _bench._compare_nearest((index, distance), (index.copy(), distance.copy()))[0] is True
    assert _bench._compare_nearest((index, distance), (index[::-1].copy(), distance))[0] is False
    assert _bench._compare_nearest((index, distance), (index, distance + np.float32(1e-6)))[0] is False


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_rewritten_line_and_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    bar = _bench.Progress(stream, total=2)
    bar.step("a long first step")
    bar.step("short")
    bar.close()
    written = stream.getvalue()
    assert "\n" not in written
    assert written.startswith("\rbench [1/2] a long first step\rbench [2/2] short")
    assert written.endswith("\r")

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert _bench.progress_stream(True) is None  # not a terminal
    monkeypatch.setattr("sys.stderr", FakeTerminal())
    assert _bench.progress_stream(True) is not None
    assert _bench.progress_stream(False) is None  # --json


def test_a_backend_slower_than_the_budget_is_timed_once_on_its_warm_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_bench, "QUICK_BUDGET_S", 0.0)  # every call is "too slow"
    report = bench_json(capsys, "--backend", "numpy", "--repeat", "3", code=0)
    for row in results(report, "numpy").values():
        assert row["times_s"] == [row["warmup_s"]] and row["best_s"] == row["warmup_s"]
        assert row["agrees"] is True
