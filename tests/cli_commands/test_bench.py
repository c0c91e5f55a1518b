"""``spacr-accel bench``: every backend that runs, checked against NumPy, wrong answers caught."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import (
    BackendDeclined,
    BackendInfo,
    BackendUnavailable,
    Declaration,
    PluginFault,
    hookimpl,
)
from spacr_accel_core.commands import _bench, _cli
from spacr_accel_core.operations._operations import OPERATIONS as TABLE
from spacr_accel_core.operations._results import agree_field, agree_nearest, agree_product
from spacr_accel_core.testing import reference_maximum_filter

OPERATIONS = list(TABLE)  # every operation of the table has a case, in the table's order
LIED = ["maximum_filter", "matmul", "nearest_neighbours", "window_maxima", "phase_correlate"]  # the liar's
RESULT_KEYS = {"backend", "status", "device", "reason", "agrees", "detail", "warmup_s", "best_s", "times_s",
               "speedup"}


class Liar:
    """Right shapes and dtypes, wrong values: only the agreement check can catch it."""

    SPACR_ACCEL_PLUGIN = Declaration(name="liar", priority=1.0)

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

    @hookimpl
    def spacr_accel_window_maxima(self, stack: np.ndarray, points: np.ndarray, size: int) -> np.ndarray:
        return np.full((points.shape[0], stack.shape[0]), -1.0, dtype=np.float32)

    @hookimpl
    def spacr_accel_phase_correlate(self, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(first.shape[0], dtype=np.int64), np.ones(first.shape[0])


class Decliner:
    """Says "not me, not now" for every operation, as CuPy does without a card."""

    SPACR_ACCEL_PLUGIN = Declaration(name="decliner", priority=1.0)

    @hookimpl
    def spacr_accel_matmul(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        raise BackendUnavailable("no device here")


class Breaker:
    """Breaks the contract two ways: a wrong shape, and an exception that is not a RuntimeError."""

    SPACR_ACCEL_PLUGIN = Declaration(name="breaker", priority=1.0)

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
    for operation in set(torch_row.operations) & set(OPERATIONS):  # the bench's three
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
    assert report["problems"] == [f"liar in {op}" for op in OPERATIONS if op in LIED]  # in the table's order
    assert [r["backend"] for op in report["operations"] for r in op["results"]] == ["numpy", "liar"] * len(OPERATIONS)
    liar = results(report, "liar")
    for operation in LIED:
        assert liar[operation]["status"] == "ok"
        assert liar[operation]["agrees"] is False
        assert results(report, "numpy")[operation]["agrees"] is True
    assert "pixels differ" in liar["maximum_filter"]["detail"]
    assert "relative error 1.0e+00" in liar["matmul"]["detail"]
    assert "indices and" in liar["nearest_neighbours"]["detail"]
    assert "values differ" in liar["window_maxima"]["detail"]
    assert "differs from the reference's" in liar["phase_correlate"]["detail"]

    assert _cli.main(["bench", "--quick", "--backend", "liar", "--repeat", "1"]) == 1
    text = capsys.readouterr().out
    assert "PROBLEMS: liar in maximum_filter" in text
    # The PROBLEMS line may wrap onto a line of its own beginning "  liar in ...".
    liar_lines = [line for line in text.splitlines() if line.startswith("  liar ") and " liar in " not in line]
    assert len(liar_lines) == len(OPERATIONS) and sum(" NO " in line for line in liar_lines) == len(LIED)


def test_a_declining_backend_is_skipped_with_its_reason(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(Decliner(), "decliner")
    report = bench_json(capsys, "--backend", "decliner", "--repeat", "1", code=0)
    decliner = results(report, "decliner")
    assert decliner["matmul"]["status"] == "skipped"
    assert decliner["matmul"]["reason"] == "BackendUnavailable: no device here"
    assert decliner["maximum_filter"]["status"] == "skipped"
    assert decliner["maximum_filter"]["reason"] == "does not implement maximum_filter"
    assert decliner["nearest_neighbours"]["reason"] == "does not implement nearest_neighbours"
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
    assert agree_field(field, field.copy()) == (True, "bit-identical")
    other = field.copy()
    other[1, 1] = np.nextafter(np.float32(4.0), np.float32(5.0))
    assert agree_field(field, other) == (False, "1 of 4 pixels differ")
    other = field.copy()
    other[0, 1] = 2.0  # a number where NumPy has NaN
    assert agree_field(field, other)[0] is False
    assert agree_field(field, field.astype(np.float64))[0] is False

    product = np.array([[1000.0, 1.0]], dtype=np.float32)
    assert agree_product(product, product + np.float32(1e-3))[0] is True
    assert agree_product(product, product * np.float32(1.001))[0] is False
    assert agree_product(product, np.full_like(product, np.nan))[0] is False

    index, distance = np.array([0, 1]), np.array([1.0, 2.0], dtype=np.float32)
    assert agree_nearest((index, distance), (index.copy(), distance.copy()))[0] is True
    assert agree_nearest((index, distance), (index[::-1].copy(), distance))[0] is False
    assert agree_nearest((index, distance), (index, distance + np.float32(1e-6)))[0] is False


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


class SlowStart:
    """Pays a one-off start-up on its first filter call (an import, a compilation), then is fast."""

    def __init__(self) -> None:
        self.started = False
        self.answers: dict[int, np.ndarray] = {}  # field -> answer: its warm calls cost ~nothing

    SPACR_ACCEL_PLUGIN = Declaration(name="slowstart", priority=1.0)

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        if not self.started:
            time.sleep(0.5)
            self.started = True
        key = hash((field.tobytes(), size))
        if key not in self.answers:
            self.answers[key] = reference_maximum_filter(field, size)
        return self.answers[key].copy()


def test_a_warm_up_over_the_budget_is_never_a_time(
    monkeypatch: pytest.MonkeyPatch, plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_bench, "QUICK_BUDGET_S", 0.0)  # every call is "too slow" to repeat
    plug(SlowStart(), "slowstart")
    report = bench_json(capsys, "--backend", "slowstart", "--repeat", "3", code=0)
    for backend in ("numpy", "slowstart"):
        for row in results(report, backend).values():
            if row["status"] != "ok":
                continue
            assert len(row["times_s"]) == 1 and row["best_s"] == row["times_s"][0], row
    slow = results(report, "slowstart")["maximum_filter"]
    assert slow["warmup_s"] >= 0.5
    assert slow["best_s"] < 0.25, "the one-off start-up was reported as the backend's time"


class NanDecliner:
    """Declines a field holding a NaN (the contract lets it), answers every other field exactly,
    as the OpenCV example does."""

    SPACR_ACCEL_PLUGIN = Declaration(name="nandecliner", priority=1.0)

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        if np.isnan(field).any():
            raise BackendDeclined("the field holds a NaN")
        return reference_maximum_filter(field, size)


class NanEater:
    """Exact on NaN-free fields, but reads a NaN as zero: only the NaN check can catch it."""

    SPACR_ACCEL_PLUGIN = Declaration(name="naneater", priority=1.0)

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        return reference_maximum_filter(np.nan_to_num(field, nan=0.0), size)


def test_a_backend_that_declines_nan_is_timed_and_the_nan_rule_still_checked(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(NanDecliner(), "nandecliner")
    plug(NanEater(), "naneater")
    report = bench_json(capsys, "--backend", "nandecliner", "--backend", "naneater", "--repeat", "1", code=1)
    decliner = results(report, "nandecliner")["maximum_filter"]
    assert decliner["status"] == "ok" and decliner["agrees"] is True and decliner["best_s"] is not None
    assert "declines dead pixels (NaN)" in decliner["detail"] and "BackendDeclined" in decliner["detail"]
    eater = results(report, "naneater")["maximum_filter"]
    assert eater["status"] == "ok" and eater["agrees"] is False
    assert "dead pixels (NaN)" in eater["detail"] and "pixels differ" in eater["detail"]
    assert report["problems"] == ["naneater in maximum_filter"]
    assert "bit-identical" in results(report, "numpy")["maximum_filter"]["detail"]


def test_the_timed_field_holds_no_nan_and_the_nan_check_holds_some() -> None:
    for quick in (True, False):
        field_case = next(case for case in _bench.cases(quick) if case.operation == "maximum_filter")
        assert not np.isnan(field_case.args[0]).any()
        assert [np.isnan(args[0]).sum() > 0 for _, args in field_case.checks] == [True]


class Prober:
    """A device prober: no operation at all (like the OpenVINO example)."""

    SPACR_ACCEL_PLUGIN = Declaration(name="justaprober")

    @hookimpl
    def spacr_accel_neural_engines(self) -> tuple[str, ...]:
        return ()


def test_a_plugin_with_no_operation_is_no_row(plug: Callable[[object, str], None]) -> None:
    plug(Prober(), "justaprober")
    statuses = {row.name: row for row in spacr_accel_core.plugins()}
    assert statuses["justaprober"].operations == ()
    names = _bench.candidates(None)
    assert "justaprober" not in names
    assert all(statuses[name].operations for name in names), names


class Accelerated:
    """Needs a device; runs the filter (forced, as the bench calls it)."""

    SPACR_ACCEL_PLUGIN = Declaration(name="carded", priority=1.0, accelerated=True)

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo(usable=False, note="no card")

    @hookimpl
    def spacr_accel_maximum_filter(self, field: np.ndarray, size: int) -> np.ndarray:
        return reference_maximum_filter(field, size)


def test_each_row_says_which_device_ran(
    monkeypatch: pytest.MonkeyPatch, plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    import spacr_accel_core.accelerator

    monkeypatch.setattr(spacr_accel_core.accelerator, "device_string", lambda: "cuda:7")
    plug(Accelerated(), "carded")
    report = bench_json(capsys, "--backend", "carded", "--repeat", "1", code=0)
    assert results(report, "carded")["maximum_filter"]["device"] == "cuda:7"
    assert results(report, "carded")["matmul"]["device"] is None  # it did not run
    assert {row["device"] for row in results(report, "numpy").values()} == {"cpu"}
    assert _cli.main(["bench", "--quick", "--backend", "carded", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:3] == ["carded", "ok", "cuda:7"] for line in lines), lines
    assert any(line.split()[:3] == ["numpy", "ok", "cpu"] for line in lines), lines


def test_a_usable_accelerated_backend_the_accelerator_cannot_name_ran_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import spacr_accel_core.accelerator

    monkeypatch.setattr(spacr_accel_core.accelerator, "device_string", lambda: "cpu")
    devices = _bench._Devices({"cupy": True, "torch": True, "numpy": False}, {"cupy": True, "torch": False})
    assert devices.of("cupy") == "gpu"  # CuPy reached its card; no prober names it
    assert devices.of("torch") == "cpu"  # forced onto the CPU
    assert devices.of("numpy") == "cpu"


def test_the_bench_times_every_operation_of_the_table() -> None:
    """The bench reads the operation table: adding an operation without a bench case fails here."""
    from spacr_accel_core.commands import _bench
    from spacr_accel_core.operations._operations import OPERATIONS

    assert [case.operation for case in _bench.cases(quick=True)] == list(OPERATIONS)


def test_without_scipy_the_landmarks_are_skipped_and_the_rest_still_built() -> None:
    """SciPy is not the core's dependency: where it cannot be imported, building the cases does not
    crash. ``spaced_peaks``' input (a smoothed plane's maxima) is not built, and every backend is
    reported skipped with the reason; ``match_triangles``' is built, and each forced call is
    refused with the reason (``BackendUnavailable``, a skip, not a problem); the other operations'
    inputs are built as before."""
    code = textwrap.dedent("""
        import json, sys
        sys.modules["scipy"] = None
        from spacr_accel_core.commands import _bench
        made = {case.operation: case for case in _bench.cases(quick=True)}
        out = {"built": sorted(name for name, case in made.items() if case.args and not case.unavailable)}
        for name in ("spaced_peaks", "match_triangles"):
            entry = _bench._one_case(made[name], ["numpy"], 2, 1.0, _bench.Progress(None, 3))
            out[name] = [(row["status"], row["reason"], row["agrees"]) for row in entry["results"]]
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert set(out["built"]) == set(OPERATIONS) - {"spaced_peaks"}
    for name in ("spaced_peaks", "match_triangles"):
        [(status, reason, agrees)] = out[name]
        assert status == "skipped" and agrees is None, (name, reason)
        assert "BackendUnavailable" in reason and "pip install scipy" in reason, (name, reason)


class ProbeOnly:
    """A device prober: installed and loaded, but it serves no operation to time."""

    SPACR_ACCEL_PLUGIN = Declaration(name="probe_only", priority=1.0)

    @hookimpl
    def spacr_accel_neural_engines(self) -> list[str]:
        return []


def test_a_probers_name_is_a_usage_error_listing_the_backends(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(ProbeOnly(), "probe_only")
    with pytest.raises(SystemExit) as info:
        _cli.main(["bench", "--json", "--backend", "probe_only", "--repeat", "1"])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert "serve no operation" in error and "probe_only" in error and "backends: " in error and "numpy" in error
