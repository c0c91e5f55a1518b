"""``spacr-accel doctor``: every section, stable JSON keys, and it never breaks, whatever is broken."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import spacr_accel_core
from spacr_accel_core import BackendInfo, accelerator, hookimpl, ops
from spacr_accel_core.commands import _cli, _doctor, _doctor_summary
from spacr_accel_core.devices import _machine

TOP_KEYS = {"schema_version", "about", "overrides", "plugins", "faulty", "blocked", "backends",
            "device", "neural_engines", "capabilities", "summary", "versions", "host_devices", "memory", "warm"}
PLUGIN_KEYS = {"name", "priority", "accelerated", "distribution", "version", "status", "reason",
               "operations", "faults"}
DEVICE_KEYS = {"error", "summary", "forced", "is_gpu", "is_cuda", *_doctor.ACCELERATOR_FIELDS}


class BrokenInfo:
    """A plugin whose self-description raises something other than RuntimeError: faulty."""

    SPACR_ACCEL_PLUGIN = spacr_accel_core.Declaration(name="brokeninfo")

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        raise TypeError("this plugin is broken on purpose")


class WrongShape:
    """Describes itself fine, ranks above NumPy, and returns a product of the wrong shape."""

    SPACR_ACCEL_PLUGIN = spacr_accel_core.Declaration(name="wrongshape", priority=10_000.0)

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo()

    @hookimpl
    def spacr_accel_matmul(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.zeros((1, 1), dtype=np.float32)


@pytest.fixture
def hung_discovery(monkeypatch: pytest.MonkeyPatch, slow_to_describe: type) -> Iterator[None]:
    """Discovery hangs on an in-process plugin for the test; released, and finished, afterwards."""
    monkeypatch.setenv("SPACR_ACCEL_PROBE_TIMEOUT", "0.3")
    release = threading.Event()
    # Not a time limit on the doctor: an unbounded doctor would wait for this release and then
    # report no time-out at all, which is what the test's assertions catch.
    watchdog = threading.Timer(30, release.set)
    watchdog.start()
    spacr_accel_core.register(slow_to_describe(release), "slow")
    spacr_accel_core.refresh()
    try:
        yield
    finally:
        release.set()
        watchdog.cancel()
        watchdog.join()
        stuck = _machine._STUCK.done
        if stuck is not None:
            stuck.wait(120)  # the abandoned discovery finishes: no thread outlives the test
        spacr_accel_core.unregister("slow")
        spacr_accel_core.refresh()


def doctor_json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert _cli.main(["doctor", "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def row(report: dict[str, Any], name: str) -> dict[str, Any]:
    rows = {r["name"]: r for r in report["plugins"]["rows"]}
    assert name in rows, f"{name} not among {sorted(rows)}"
    found: dict[str, Any] = rows[name]
    return found


def test_text_has_every_section_and_numpy_is_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["doctor"]) == 0
    text = capsys.readouterr().out
    for heading in ("Device", "Neural engines found, not used", "Capabilities", "Plugins (best first)",
                    "Faulty plugins", "Blocked plugins", "Dispatch order", "Overrides in force"):
        assert f"\n{heading}" in text, heading
    numpy_line = next(line for line in plugin_table(text) if line.strip().startswith("numpy "))
    assert " ok " in numpy_line and "spacr-accel-numpy" in numpy_line
    for name in _doctor.overrides():
        assert name in text


def test_json_has_the_documented_keys_and_numpy_is_ok(capsys: pytest.CaptureFixture[str]) -> None:
    report = doctor_json(capsys)
    assert set(report) == TOP_KEYS
    assert report["schema_version"] == _doctor.SCHEMA_VERSION
    assert report["about"]["error"] is None and report["about"]["api_version"] == spacr_accel_core.API_VERSION
    assert report["plugins"]["error"] is None
    for plugin in report["plugins"]["rows"]:
        assert set(plugin) == PLUGIN_KEYS
    numpy = row(report, "numpy")
    assert numpy["status"] == "ok" and numpy["reason"] == "" and numpy["accelerated"] is False
    assert numpy["distribution"] == "spacr-accel-numpy" and numpy["version"]
    assert set(numpy["operations"]) == set(spacr_accel_core.dispatch._registry.OPERATIONS)
    assert report["backends"]["gpu"] == list(ops.accelerated_backends(gpu=True))
    assert report["backends"]["cpu"][-1] == "numpy"
    assert set(report["overrides"]) == {*_doctor.overrides(), "restriction", "only", "operations",
                                        "not_installed", "error"}
    assert set(report["device"]) == DEVICE_KEYS
    assert set(report["neural_engines"]) == {"error", "found"}
    assert set(report["capabilities"]) == {"error", "rows"}
    assert report["faulty"] == [] and report["blocked"] == []


def test_device_section_reports_the_resolved_accelerator(capsys: pytest.CaptureFixture[str]) -> None:
    report = doctor_json(capsys)
    device = report["device"]
    assert device["error"] is None, device["error"]
    found = accelerator.resolve()
    assert device["kind"] == found.kind and device["device"] == found.device
    assert device["usable"] is found.usable and device["detected"] is found.detected
    assert device["summary"] == accelerator.describe()
    assert report["capabilities"]["error"] is None and report["capabilities"]["rows"]
    assert all(set(r) == {"task", "accelerated", "detail"} for r in report["capabilities"]["rows"])
    assert report["neural_engines"]["found"] == list(accelerator.neural_engines())


def test_a_plugin_that_fails_to_describe_itself_is_faulty_and_the_doctor_exits_0(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(BrokenInfo(), "brokeninfo")
    report = doctor_json(capsys)
    assert row(report, "brokeninfo")["status"] == "faulty"
    faulty = {r["name"]: r for r in report["faulty"]}
    assert "TypeError: this plugin is broken on purpose" in faulty["brokeninfo"]["reason"]
    assert row(report, "numpy")["status"] == "ok"

    assert _cli.main(["doctor"]) == 0
    text = capsys.readouterr().out
    faulty_part = text.split("\nFaulty plugins\n", 1)[1].split("\n\n", 1)[0]
    assert "brokeninfo: backend_info raised TypeError: this plugin is broken on purpose" in faulty_part


def test_a_fault_at_run_time_is_listed_with_its_operation(
    plug: Callable[[object, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    plug(WrongShape(), "wrongshape")
    product = ops.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32))  # falls to numpy
    assert product.shape == (3, 2)
    report = doctor_json(capsys)
    faulty = {r["name"]: r for r in report["faulty"]}
    assert [f["operation"] for f in faulty["wrongshape"]["faults"]] == ["matmul"]
    assert "float32[3, 2]" in faulty["wrongshape"]["faults"][0]["what"]

    assert _cli.main(["doctor"]) == 0
    assert "    matmul: returned float32[1, 1]" in capsys.readouterr().out


def test_a_broken_accelerator_is_reported_per_section_never_raised(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(*_args: object, **_kwargs: object) -> Any:
        raise OSError("driver went away\nsecond line")

    for name in ("resolve", "describe", "neural_engines", "capabilities"):
        monkeypatch.setattr(accelerator, name, explode)
    report = doctor_json(capsys)
    assert report["device"]["error"] == "OSError: driver went away"
    assert report["device"]["kind"] is None
    assert report["neural_engines"]["error"] == "OSError: driver went away"
    assert report["capabilities"]["error"]
    assert report["plugins"]["error"] is None and row(report, "numpy")["status"] == "ok"

    assert _cli.main(["doctor"]) == 0
    text = capsys.readouterr().out
    assert "ERROR: OSError: driver went away" in text.split("\nDevice\n", 1)[1].split("\n\n", 1)[0]


def test_a_broken_registry_is_reported_never_raised(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode() -> Any:
        raise SystemExit("a plugin called sys.exit")

    monkeypatch.setattr(spacr_accel_core, "plugins", explode)
    report = doctor_json(capsys)
    assert report["plugins"] == {"error": "SystemExit: a plugin called sys.exit", "rows": []}
    assert report["faulty"] == [] and report["blocked"] == []


def test_blocked_and_restricted_by_the_environment_in_a_subprocess() -> None:
    env = {**os.environ, "SPACR_ACCEL_DISABLE": "cupy", "SPACR_ACCEL_BACKENDS": "numpy"}
    done = subprocess.run([sys.executable, "-m", "spacr_accel_core", "doctor", "--json"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert row(report, "cupy")["status"] == "blocked"
    assert report["blocked"] == [{"name": "cupy", "reason": "named in SPACR_ACCEL_DISABLE"}]
    assert report["overrides"]["SPACR_ACCEL_DISABLE"] == "cupy"
    assert report["overrides"]["SPACR_ACCEL_BACKENDS"] == "numpy"
    assert report["overrides"]["restriction"] == ["numpy"]
    assert report["backends"]["gpu"] == ["numpy"]


# A bare ``spacr-accel`` prints the help and exits 0 (tests/cli_commands/test_cli_bare.py).
@pytest.mark.parametrize("argv", [["doctor", "--bogus"], ["bench", "--repeat", "0"], ["nothing"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        _cli.main(argv)
    assert stop.value.code == 2
    assert "usage: spacr-accel" in capsys.readouterr().err


def test_table_aligns_columns_and_leaves_the_last_unpadded() -> None:
    lines = _doctor.table(["a", "bb", "c"], [["xxx", "y", "z"], ["p", "qqqq", ""]])
    assert lines == ["  a    bb    c", "  xxx  y     z", "  p    qqqq"]


def test_version_names_the_core(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        _cli.main(["--version"])
    assert stop.value.code == 0
    version = importlib.metadata.version("spacr-accel-core")
    assert capsys.readouterr().out == f"spacr-accel (spacr-accel-core) {version}\n"


def test_text_survives_a_terminal_that_cannot_encode_it(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    monkeypatch.setattr("sys.stdout", stream)
    _cli._write("plugin \u00e9t\u00e9: r\u00e9sum\u00e9 \u2192 ok\n")
    assert raw.getvalue() == b"plugin ?t?: r?sum? ? ok\n"


def test_the_program_ends_normally_so_other_libraries_atexit_handlers_run() -> None:
    script = ("import atexit, sys\nfrom spacr_accel_core.commands._cli import main\n"
              "atexit.register(lambda: print('atexit ran'))\n"
              "sys.argv = ['spacr-accel', 'doctor', '--json']\nsys.exit(main())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("atexit ran")


def test_bench_refuses_a_backend_that_is_not_installed() -> None:
    done = subprocess.run([sys.executable, "-m", "spacr_accel_core", "bench", "--quick", "--backend", "nonsense"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "nonsense" in done.stderr and "installed: " in done.stderr and "numpy" in done.stderr
    assert "[nonsense]" not in done.stderr + done.stdout  # no made-up extra to install


def test_the_console_script_is_installed_and_runs() -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    script = next((p for p in (scripts / "spacr-accel", scripts / "spacr-accel.exe") if p.exists()), None)
    assert script is not None, f"no spacr-accel console script in {scripts}"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.startswith("spacr-accel (spacr-accel-core) "), done.stderr


def test_a_report_the_text_cannot_show_falls_back_to_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(_report: object) -> str:
        raise KeyError("a section nobody expected")

    monkeypatch.setattr(_doctor, "render", explode)
    assert _cli.main(["doctor"]) == 0
    first, rest = capsys.readouterr().out.split("\n", 1)
    assert first.startswith("(the text report failed: KeyError")
    assert set(json.loads(rest)) == TOP_KEYS


@pytest.mark.usefixtures("hung_discovery")
def test_a_plugin_that_hangs_discovery_is_reported_not_waited_for(capsys: pytest.CaptureFixture[str]) -> None:
    report = doctor_json(capsys)  # exits 0
    note = "plugin discovery did not finish within 0.3 s and was abandoned"
    assert report["plugins"]["rows"] == []
    assert report["plugins"]["error"].startswith(f"TimeoutError: {note}")
    assert "SPACR_ACCEL_PROBE_TIMEOUT" in report["plugins"]["error"]
    assert note in report["backends"]["error"]
    assert report["device"]["error"] is None
    assert report["device"]["kind"] == "cpu" and note in report["device"]["note"]
    unmixing = {r["task"]: r for r in report["capabilities"]["rows"]}["Spectral unmixing (matmul)"]
    assert unmixing["detail"].startswith(f"unknown: {note}")

    assert _cli.main(["doctor"]) == 0
    text = capsys.readouterr().out
    plugins = text.split("\nPlugins (best first)\n", 1)[1].split("\n\n", 1)[0]
    # Either the abandoned discovery is still running (the section says so), or it has finished by
    # now, having abandoned the hung backend_info under its own bound: then the row names the plugin.
    named = "slow" in plugins and "spacr_accel_backend_info did not answer within 0.3 s" in plugins
    assert f"ERROR: TimeoutError: {note}" in plugins or named, plugins


def test_the_bounded_sections_see_the_callers_use_context(capsys: pytest.CaptureFixture[str]) -> None:
    with spacr_accel_core.use("numpy"):
        report = doctor_json(capsys)
    assert report["overrides"]["restriction"] == ["numpy"]
    assert report["backends"]["gpu"] == ["numpy"]
    unmixing = {r["task"]: r for r in report["capabilities"]["rows"]}["Spectral unmixing (matmul)"]
    assert unmixing["detail"].startswith("numpy backend")


# ---- what a lab user pastes into a bug report ---------------------------------------------------


def text_doctor(capsys: pytest.CaptureFixture[str]) -> str:
    assert _cli.main(["doctor"]) == 0
    out: str = capsys.readouterr().out
    return out


def plugin_table(text: str) -> list[str]:
    return text.split("\nPlugins (best first)\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_the_summary_comes_first_then_versions_hosts_and_memory(capsys: pytest.CaptureFixture[str]) -> None:
    text = text_doctor(capsys)
    headings = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert headings[1:6] == ["Summary", "Versions", "Host devices (listed by the operating system)",
                             "Device", "Memory"]
    summary = text.split("\nSummary\n", 1)[1].split("\n\n", 1)[0]
    assert summary.splitlines()[0].startswith("  This machine: ")
    assert "  Segmentation (Cellpose)" in summary and "To fix: " in summary


def test_no_line_is_wider_than_100_columns_but_the_plugin_table(
        capsys: pytest.CaptureFixture[str], plug: Callable[[object, str], None]) -> None:
    plug(BrokenInfo(), "brokeninfo")  # a long reason in the faulty section too
    text = text_doctor(capsys)
    table_lines = set(plugin_table(text))
    wide = [line for line in text.splitlines() if len(line) > _doctor.WIDTH and line not in table_lines]
    assert wide == []


def test_one_short_line_per_capability(capsys: pytest.CaptureFixture[str]) -> None:
    text = text_doctor(capsys)
    caps = text.split("\nCapabilities\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert caps and all("passed over" not in line for line in caps)
    assert [line.split("  ")[1] for line in caps[:5]] == [
        "Segmentation (Cellpose)", "Model training", "Model inference / classification",
        "Live backdrop and spaceout", "UMAP / t-SNE / clustering"]


def test_versions_are_read_from_metadata_without_importing(capsys: pytest.CaptureFixture[str]) -> None:
    code = ("import json, sys\nfrom spacr_accel_core.commands import _doctor\nreport = _doctor.collect()\n"
            "print(json.dumps([report['versions'], sorted(m for m in ('torch', 'cupy', 'numba') "
            "if m in sys.modules)]))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACR_")}
    env["SPACR_ACCEL_DISABLE"] = "torch,cupy,numba,openvino,opencv"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          check=True, env=env)
    versions, imported = json.loads(done.stdout.splitlines()[-1])
    assert imported == []
    assert versions["python"] == sys.version.split()[0]
    assert versions["numpy"] == importlib.metadata.version("numpy")
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = None
    assert versions["torch"] == torch_version
    if torch_version and torch_version.endswith("+cpu"):
        assert versions["torch_build"] == "CPU-only"


@pytest.mark.parametrize(("version", "build"), [
    ("2.5.1+cu121", "CUDA 12.1"), ("2.7.0+cu128", "CUDA 12.8"), ("2.5.1+rocm6.2", "ROCm 6.2"),
    ("2.13.0+cpu", "CPU-only"), (None, None),
])
def test_the_torch_build_from_the_wheel_label(version: str | None, build: str | None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert _doctor_summary._torch_build(version) == build


class Card:
    """A host-devices plugin: the card the operating system would list."""

    SPACR_ACCEL_PLUGIN = spacr_accel_core.Declaration(name="card")

    def __init__(self, device: spacr_accel_core.HostDevice) -> None:
        self.device = device

    @hookimpl
    def spacr_accel_host_devices(self) -> list[spacr_accel_core.HostDevice]:
        return [self.device]


RTX_4090 = spacr_accel_core.HostDevice(vendor="NVIDIA", name="NVIDIA GeForce RTX 4090", pci_id="10de:2684",
                                       address="0000:01:00.0", driver="nvidia", driver_version="570.86.15",
                                       source="sysfs")


def test_a_cpu_wheel_beside_a_card_is_found_and_the_fix_named(
        capsys: pytest.CaptureFixture[str], plug: Callable[[object, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None or torch.version.hip is not None:
        pytest.skip("this torch is not a CPU-only build")
    from spacr_accel_torch import _nodes

    monkeypatch.setattr(_nodes, "_no_device_node", lambda: None)  # as with the NVIDIA driver loaded
    plug(Card(RTX_4090), "card")
    report = doctor_json(capsys)
    assert report["device"]["kind"] == "cuda" and report["device"]["usable"] is False
    assert report["host_devices"]["rows"][0]["name"] == "NVIDIA GeForce RTX 4090"
    assert report["versions"]["driver"] == "nvidia 570.86.15"
    assert f"this PyTorch {torch.__version__} is a CPU-only build" in report["summary"]["fix"]
    text = text_doctor(capsys)
    summary = text.split("\nSummary\n", 1)[1].split("\n\n", 1)[0]
    assert "This machine: NVIDIA GeForce RTX 4090 (GPU)" in summary
    assert "NVIDIA GeForce RTX 4090 is found, not used" in summary
    assert "download.pytorch.org/whl/cu128" in summary


def test_a_pip_command_in_a_long_note_stays_whole_on_its_own_line() -> None:
    command = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"
    note = ("this PyTorch 2.13.0+cpu is a CPU-only build, so it cannot use the NVIDIA GeForce RTX 4090; "
            f"install the CUDA build: {command}")
    lines = _doctor._wrap(f"To fix: {note}")
    assert f"    {command}" in lines and all(len(line) <= _doctor.WIDTH for line in lines)
    deep = _doctor._wrap(note, indent="  ", follow=" " * 32)  # a table's value column
    assert f"    {command}" in deep and all(len(line) <= _doctor.WIDTH for line in deep)


_CLONE = "/home/a-long-user-name/src/lab/spacr-accel-checkout/scripts/install-from-clone torch"
"""A clone's install command as long as a home directory makes it: too long to share a line."""


def _reads_as_one_sentence(lines: list[str], text: str) -> None:
    """Every line fits, no parenthesis is parted from its words, and the words are the text's."""
    assert all(len(line) <= _doctor.WIDTH for line in lines), lines
    assert not any(line.rstrip().endswith("(") for line in lines), lines
    assert not any(line.lstrip().startswith(")") for line in lines), lines
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())


@pytest.mark.parametrize("follow", ["    ", " " * 32])  # a summary line, a table's value column
def test_a_long_command_in_parentheses_opens_and_closes_with_its_words(follow: str) -> None:
    note = f"no device prober is installed (`{_CLONE}` adds one)"
    for text in (f"CPU ({note})", f"note  {note}", f"To fix: {note}, and the words after it go on as a sentence"):
        lines = _doctor._wrap(text, follow=follow)
        _reads_as_one_sentence(lines, text)
        assert [line.strip() for line in lines if _CLONE in line] == [f"(`{_CLONE}`"]  # its own line, whole


def test_punctuation_after_a_long_command_stays_on_its_line() -> None:
    text = f"the prober says so (run `{_CLONE}`), and `spacr-accel doctor --json` prints the same for scripts"
    lines = _doctor._wrap(text)
    _reads_as_one_sentence(lines, text)
    assert f"    `{_CLONE}`)," in lines


def test_a_bare_pip_command_in_parentheses_keeps_them() -> None:
    command = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"
    text = f"this PyTorch is a CPU-only build, so it cannot use the NVIDIA GeForce RTX 4090 ({command})"
    lines = _doctor._wrap(f"To fix: {text}")
    _reads_as_one_sentence(lines, f"To fix: {text}")
    assert f"    ({command})" in lines


def test_a_note_with_a_command_that_fits_one_line_stays_one_line() -> None:
    text = "CPU (no device prober is installed (`pip install 'spacr-accel[torch]'` adds one))"
    assert _doctor._wrap(text) == [f"  {text}"]


def test_the_overrides_are_the_cores_and_each_plugins_declared_settings(monkeypatch):
    """The doctor names no vendor itself: a plugin's declared settings reach its table, and a
    per-operation order that is set is shown with the configuration in force."""
    from spacr_accel_core import config

    monkeypatch.setenv("SPACR_ACCEL_BACKENDS_MAXIMUM_FILTER", "numpy")
    spacr_accel_core_refresh()
    declared = {setting.environment for owner, setting in config.variables() if owner != "core"}  # discovers
    names = _doctor.overrides()
    assert declared and declared <= set(names)
    assert "SPACR_ACCEL_BACKENDS_MAXIMUM_FILTER" in names
    report = _doctor.collect()
    assert report["overrides"]["operations"] == {"maximum_filter": ["numpy"]}
    assert "maximum_filter: numpy" in _doctor.render(report)
    monkeypatch.delenv("SPACR_ACCEL_BACKENDS_MAXIMUM_FILTER")
    spacr_accel_core_refresh()


def spacr_accel_core_refresh() -> None:
    import spacr_accel_core

    spacr_accel_core.refresh()
