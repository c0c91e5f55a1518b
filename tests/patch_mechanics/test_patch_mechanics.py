"""Installing, undoing and scoping the patch; the check and strict modes; the reasons a call is
left to spaCR; the variable, spawned workers and the command line."""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import patch
from spacr_accel_core.patch import _served
from spacr_accel_core.patch._startup import modes_from


def _run(args: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=False, capture_output=True, text=True, **options)


SEAMS = (("spacr.ops_accel", "maximum_filter"), ("spacr.ops_accel", "matmul"),
         ("spacr.ops_accel", "nearest_neighbours"), ("spacr.ops_register", "phase_correlate"),
         ("spacr.ops_cycles", "phase_correlate"), ("spacr.ops_sbs", "extract_bases"),
         ("spacr.ops_engine", "_decode_field"), ("spacr.ops_phenotype", "nuclear_points"))


def _plant(monkeypatch: pytest.MonkeyPatch, seam: str, serve: Callable[..., Any]) -> None:
    """The installed table with ``seam``'s way of serving replaced by ``serve`` (the wrapper reads
    the table when the seam is made: install again after this)."""
    installer = patch._installer
    assert installer is not None
    rows = tuple(dataclasses.replace(row, serve=serve) if row.name == seam else row for row in installer.table.seams)
    monkeypatch.setattr(installer, "table", dataclasses.replace(installer.table, seams=rows))


def _objects() -> dict[tuple[str, str], object]:
    return {(module, name): getattr(importlib.import_module(module), name) for module, name in SEAMS}


def test_install_replaces_every_seam_and_uninstall_restores_each_original_object() -> None:
    from spacr import ops_register

    before = _objects()
    assert not patch.installed()
    assert patch.install() and patch.install()  # idempotent
    during = _objects()
    try:
        assert patch.installed()
        assert all(during[key] is not before[key] for key in SEAMS), "a seam was not replaced"
        assert sorted(ops_register._SURFACES) == ["cupy", "numpy", "torch"]  # no name of the patch's
        assert ops_register._SURFACES["numpy"] is not ops_register._surface_numpy
        assert during[("spacr.ops_cycles", "phase_correlate")] is not during[("spacr.ops_register", "phase_correlate")]
    finally:
        patch.uninstall()
        patch.uninstall()
    after = _objects()
    assert all(after[key] is before[key] for key in SEAMS)
    assert ops_register._SURFACES["numpy"] is ops_register._surface_numpy and not patch.installed()


def test_modules_imported_after_install_are_patched_and_restored_to_spacrs_own(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        from spacr_accel_core import patch
        assert "spacr.ops_cycles" not in sys.modules
        patch.install()
        from spacr import ops_cycles, ops_register
        original = ops_register.phase_correlate.__spacr_accel_original__
        assert ops_cycles.phase_correlate.__spacr_accel_original__ is original
        patch.uninstall()
        assert ops_cycles.phase_correlate is original and ops_register.phase_correlate is original
        print("ok")
    """)
    done = _run([sys.executable, "-c", script], timeout=120,
                          env={**os.environ, "SPACR_ACCEL_PATCH": ""})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_scipy_is_replaced_only_inside_spacrs_functions(served_only: None) -> None:
    import scipy.ndimage
    from scipy import ndimage
    from spacr import ops_engine

    real = scipy.ndimage.gaussian_laplace
    assert ndimage is scipy.ndimage and real.__module__.startswith("scipy.")
    assert ops_engine._decode_field.__code__ is ops_engine._decode_field.__spacr_accel_original__.__code__
    plane = np.random.default_rng(0).random((40, 40), dtype=np.float32)
    from spacr_accel_core import ops

    # the registry's own floor reaches SciPy itself: same bits, no recursion through the patch
    assert np.array_equal(ops.gaussian_laplace(plane, 1.0, backend="numpy"), real(plane, 1.0))
    assert not patch.report().seams


def test_the_check_mode_raises_on_a_planted_difference(patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from spacr import ops_accel

    real = _served.maximum_filter

    def off_by_one_ulp(*args: object, **kwargs: object) -> tuple[np.ndarray, str]:
        answer, backend = real(*args, **kwargs)
        answer = answer.copy()
        answer[3, 4] = np.nextafter(answer[3, 4], np.float32(np.inf))
        return answer, backend

    _plant(monkeypatch, "spacr.ops_accel.maximum_filter", off_by_one_ulp)
    patch.uninstall()
    patch.install(check=True)  # the wrapper reads the table when the seam is made
    score = np.random.default_rng(2).random((20, 30), dtype=np.float32)
    with pytest.raises(patch.PatchMismatch, match=r"ops_accel\.maximum_filter\(float32\[20, 30\], 5\).*\[3, 4\]"):
        ops_accel.maximum_filter(score, 5)


def test_strict_mode_names_why_a_call_could_not_be_served() -> None:
    from spacr import ops_accel

    patch.install(strict=True)
    try:
        field = np.ones((8, 8), np.float32)
        field[2, 2] = np.nan
        with pytest.raises(patch.PatchMismatch, match="could not be served: a NaN in the field"):
            ops_accel.maximum_filter(field, 3)
    finally:
        patch.install()
        patch.uninstall()


def _field(kind: str) -> np.ndarray:
    data = np.random.default_rng(4).random((24, 24), dtype=np.float32)
    if kind == "nan":
        data[5, 5] = np.nan
    if kind == "negative zero":
        data[5, 5] = -0.0
    return data.astype(np.float64) if kind == "float64" else data


PASSED = [
    ("maximum_filter", lambda m: m["accel"].maximum_filter(_field("nan"), 3), "a NaN in the field"),
    ("maximum_filter", lambda m: m["accel"].maximum_filter(_field("negative zero"), 3), "a -0.0"),
    ("maximum_filter", lambda m: m["accel"].maximum_filter(_field(""), 3, backend="numpy"), "backend= given"),
    ("matmul", lambda m: m["accel"].matmul(np.ones((3, 2)), np.ones((2, 2))), "BLAS"),
    ("extract_bases", lambda m: m["sbs"].extract_bases(np.ones((2, 2, 9, 9), np.float32), np.array([[0, 9]])),
     "a peak outside the field"),
    ("phase_correlate", lambda m: m["register"].phase_correlate(_field(""), _field(""), backend="numpy"),
     "backend= given"),
    ("nearest_neighbours", lambda m: m["accel"].nearest_neighbours(np.ones((3, 2)), np.ones((1, 2))),
     "two target points"),
]


@pytest.mark.parametrize(("seam", "call", "reason"), PASSED, ids=[f"{row[0]}: {row[2]}" for row in PASSED])
def test_each_refused_argument_goes_to_spacr_with_its_reason(served_only: None, seam: str,
                                                              call: Callable[[dict[str, Any]], object],
                                                              reason: str) -> None:
    from spacr import ops_accel, ops_register, ops_sbs

    modules = {"accel": ops_accel, "register": ops_register, "sbs": ops_sbs}
    patched = call(modules)
    rows = [row for row in patch.report().seams if row.seam.endswith(seam)]
    assert rows and not rows[0].served and any(reason in text for text, _n, _s in rows[0].passed), rows
    patch.uninstall()
    assert repr(call(modules)) == repr(patched)


@pytest.mark.parametrize(("function", "arguments", "reason"), [
    ("gaussian_laplace", ((), {"output": np.float64}), "output= given"),
    ("gaussian_laplace", ((), {"mode": "constant"}), "mode='constant'"),
    ("minimum_filter", ((), {"footprint": np.ones((3, 3), bool)}), "footprint= given"),
    ("minimum_filter", ((), {"origin": 1}), "origin=1"),
    ("minimum_filter", ((), {"size": 4}), "an even or one-pixel window"),
    ("gaussian_filter", ((), {"order": 1}), "order=1"),
])
def test_scipys_arguments_the_registry_does_not_reproduce_go_to_scipy(function: str, arguments: tuple[
        tuple[object, ...], dict[str, object]], reason: str) -> None:
    defaults = {"gaussian_laplace": {"sigma": 1.0}, "minimum_filter": {"size": 5}, "gaussian_filter": {"sigma": 1.0}}
    keywords = {**defaults[function], **arguments[1]}
    with pytest.raises(_served.PassThrough, match=reason.replace("(", r"\(")):
        getattr(_served, function)(_field(""), **keywords)
    with pytest.raises(_served.PassThrough, match="not a float32 ndarray"):
        getattr(_served, function)(_field("float64"), **defaults[function])


def test_a_spacr_no_table_covers_or_no_spacr_at_all_is_patched_nowhere_with_a_warning() -> None:
    script = textwrap.dedent("""
        import importlib.metadata as metadata, warnings
        real = metadata.version
        def version(name):
            if name != "spacr":
                return real(name)
            if MODE == "absent":
                raise metadata.PackageNotFoundError(name)
            return "9.0.1"
        metadata.version = version
        from spacr_accel_core import patch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            print(patch.install(), patch.installed(), caught[0].message)
        from spacr import ops_accel
        print(hasattr(ops_accel.maximum_filter, "__spacr_accel_original__"))
    """)
    for mode, words in (("unknown", "spaCR 9.0.1 is not a version the seams were verified against (1.5.x)"),
                        ("absent", "spaCR is not installed")):
        done = _run([sys.executable, "-c", f"MODE = {mode!r}\n{script}"],
                              timeout=120, env={**os.environ, "SPACR_ACCEL_PATCH": ""})
        assert done.returncode == 0, done.stderr
        first, second = done.stdout.strip().splitlines()
        assert first.startswith("False False") and words in first and second == "False", done.stdout


def test_the_variables_words() -> None:
    assert modes_from("") is None and modes_from("0") is None and modes_from(" off ") is None
    plain = {"check": False, "strict": False, "report": False, "keep_memory": None}
    assert modes_from("1") == plain
    assert modes_from("check, Report") == {**plain, "check": True, "report": True}
    assert modes_from("1,keep-memory") == {**plain, "keep_memory": True}
    assert modes_from("1, Free-Memory") == {**plain, "keep_memory": False}
    with pytest.warns(RuntimeWarning, match="ignoring 'fast'"):
        assert modes_from("1,fast") == plain
    with pytest.warns(RuntimeWarning, match="keep-memory and free-memory contradict each other"):
        assert modes_from("1,keep-memory,free-memory") == plain


def test_keep_memory_that_cannot_be_kept_warns_and_still_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = patch.HeapSetting(False, "this process does not run on glibc")
    monkeypatch.setattr(patch, "keep_freed_memory", lambda: refused)
    was = patch.installed()
    try:
        with pytest.warns(RuntimeWarning, match="freed memory is not kept: this process does not run on glibc"):
            assert patch.install(keep_memory=True)
    finally:
        if not was:
            patch.uninstall()


def test_the_command_keeps_freed_memory_in_the_program_and_what_it_spawns(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import os
        from spacr_accel_core.patch import _heap
        print(os.environ["SPACR_ACCEL_PATCH"], [setting.applied for setting in _heap._applied])
    """), encoding="utf-8")
    env = {**os.environ, "SPACR_ACCEL_PATCH": ""}
    done = _run([sys.executable, "-m", "spacr_accel_core", "run", "--keep-memory", "--report", "--keep-memory",
                 "job.py"], timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == f"1,keep-memory,report {[_heap_applies()]}", done.stdout


def test_the_command_frees_memory_everywhere_when_told(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import os
        from spacr_accel_core.patch import _heap
        print(os.environ["SPACR_ACCEL_PATCH"], _heap.policy())
    """), encoding="utf-8")
    env = {**os.environ, "SPACR_ACCEL_PATCH": ""}
    done = _run([sys.executable, "-m", "spacr_accel_core", "run", "--free-memory", "job.py"], timeout=120,
                cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "1,free-memory False", done.stdout
    both = _run([sys.executable, "-m", "spacr_accel_core", "run", "--free-memory", "--keep-memory", "job.py"],
                timeout=120, cwd=tmp_path, env=env)
    assert both.returncode == 2 and "--keep-memory and --free-memory contradict each other" in both.stderr
    assert both.stdout == "", both.stdout


KEPT_IN_WORKERS = """
import multiprocessing

def child(_):
    from spacr_accel_core.patch import _heap
    return [setting.applied for setting in _heap._applied]

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(child, range(2)))
"""


def test_the_variables_keep_memory_reaches_spawned_workers(tmp_path: Path) -> None:
    script = tmp_path / "kept.py"
    script.write_text(KEPT_IN_WORKERS, encoding="utf-8")
    done = _run([sys.executable, str(script)], timeout=300, env={**os.environ, "SPACR_ACCEL_PATCH": "1,keep-memory"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([[_heap_applies()]] * 2), done.stdout
    plain = _run([sys.executable, str(script)], timeout=300, env={**os.environ, "SPACR_ACCEL_PATCH": "1"})
    assert plain.stdout.strip() == "[[], []]", plain.stderr


def _heap_applies() -> bool:
    from spacr_accel_core.patch import _heap

    return _heap._glibc() is not None


def test_the_startup_file_is_installed_beside_the_packages() -> None:
    line = (Path(sysconfig.get_paths()["purelib"]) / "spacr_accel_patch.pth").read_text(encoding="utf-8")
    assert line.startswith("import os;") and "SPACR_ACCEL_PATCH" in line



def test_the_startup_file_imports_nothing_and_the_package_never_loads_the_patch() -> None:
    """Unset, the variable costs a process one lookup; set, its import hook waits for spaCR: no
    module of the core is loaded at start either way, nor the patch by ``import spacr_accel_core.ops``."""
    code = ("import sys; before = sorted(m for m in sys.modules if m.startswith('spacr_accel_core')); "
            "import spacr_accel_core.ops; "
            "print(before, sorted(m for m in sys.modules if m.startswith('spacr_accel_core.patch')))")
    env = {k: v for k, v in os.environ.items() if k != "SPACR_ACCEL_PATCH"}
    done = _run([sys.executable, "-c", code], timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []", done.stdout
    patched = _run([sys.executable, "-c", code], timeout=120, env={**env, "SPACR_ACCEL_PATCH": "1"})
    assert patched.returncode == 0, patched.stderr
    assert patched.stdout.strip() == "[] []", patched.stdout

SPAWNED = """
import multiprocessing, sys

def child(_):
    from spacr_accel_core import patch
    from spacr import ops_accel, ops_sbs
    import numpy as np
    ops_sbs.find_peaks(np.random.default_rng(0).random((32, 32), dtype=np.float32))
    served = sum(n for row in patch.report().seams for _b, n, _s in row.served)
    return patch.installed(), hasattr(ops_accel.maximum_filter, "__spacr_accel_original__"), served > 0

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(child, range(2)))
"""


def test_a_spawned_worker_is_patched_by_the_variable(tmp_path: Path) -> None:
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED, encoding="utf-8")
    done = _run([sys.executable, str(script)], timeout=300,
                          env={**os.environ, "SPACR_ACCEL_PATCH": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(True, True, True), (True, True, True)]", done.stdout
    plain = _run([sys.executable, str(script)], timeout=300,
                           env={**os.environ, "SPACR_ACCEL_PATCH": ""})
    assert plain.stdout.strip() == "[(False, False, False), (False, False, False)]", plain.stderr


def test_the_command_runs_a_script_or_a_module_patched_with_its_arguments_and_exit_code(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import sys
        import numpy as np
        from spacr import ops_sbs
        ops_sbs.find_peaks(np.random.default_rng(0).random((32, 32), dtype=np.float32))
        print("args", sys.argv[1:])
        sys.exit(3)
    """), encoding="utf-8")
    command = [sys.executable, "-m", "spacr_accel_core", "run", "--report"]
    env = {**os.environ, "SPACR_ACCEL_PATCH": "", "PYTHONPATH": str(tmp_path)}
    for target in (["job.py", "a", "b"], ["-m", "job", "a", "b"]):
        done = _run([*command, *target], timeout=120, cwd=tmp_path, env=env)
        assert done.returncode == 3, done.stderr
        assert "args ['a', 'b']" in done.stdout
        assert "spacr.ops_accel.maximum_filter: 1 calls" in done.stderr, done.stderr
    module = _run([sys.executable, "-m", "spacr_accel_core.patch", "--strict", "job.py"],
                            timeout=120, cwd=tmp_path, env=env)
    assert module.returncode == 3 and "args []" in module.stdout, module.stderr
    usage = _run([sys.executable, "-m", "spacr_accel_core.patch"], timeout=60)
    assert usage.returncode == 2 and "name a script or -m module" in usage.stderr


def test_the_report_names_the_backend_that_served_each_call(served_only: None) -> None:
    """The served backend is read without building the dispatch record, and is that record's."""
    from spacr import ops_accel

    from spacr_accel_core import last_dispatch
    from spacr_accel_core.dispatch._registry import REGISTRY

    patch.reset()
    field = np.random.default_rng(3).random((24, 24), dtype=np.float32)
    ops_accel.maximum_filter(field, 3)
    served = last_dispatch()
    assert served is not None and REGISTRY.last_backend() == served.backend
    (seam,) = [row for row in patch.report().seams if row.seam.endswith("maximum_filter")]
    assert [backend for backend, _, _ in seam.served] == [served.backend]
