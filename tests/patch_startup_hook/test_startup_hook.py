"""``SPACR_ACCEL_PATCH`` through the import hook: a start that imports nothing beyond the standard
library, and spaCR patched when its patched modules are first imported, as if the patch had been
installed at start (each fresh interpreter compared with one that called ``patch.install()``
itself)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _spacr_accel_hook import PATCH_PACKAGE, SPACR_MODULES, modes_from
from spacr_accel_core.patch._table import TABLES

ROOT = Path(__file__).resolve().parents[2]


def _env(value: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SPACR_ACCEL_PATCH"}
    if value is not None:
        env["SPACR_ACCEL_PATCH"] = value
    return {**env, **extra}


def _python(code: str, value: str | None, **extra: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=_env(value, **extra), check=False)
    assert done.returncode == 0, done.stderr
    return done


def _modules_at_start(value: str | None) -> set[str]:
    return set(ast.literal_eval(_python("import sys; print(sorted(sys.modules))", value).stdout))


@pytest.mark.parametrize("value", ["1", "check,strict", "1,report,keep-memory"])
def test_the_start_with_the_variable_set_imports_nothing_beyond_the_standard_library(value: str) -> None:
    unset = _modules_at_start(None)
    started = _modules_at_start(value)
    beyond = started - unset
    assert "_spacr_accel_hook" in beyond, "the hook was not registered"
    foreign = sorted(name for name in beyond - {"_spacr_accel_hook"}
                     if name.split(".")[0] not in sys.stdlib_module_names)
    assert foreign == [], foreign
    assert not any(name.startswith(("numpy", "spacr")) for name in started), sorted(started)


def test_spacrs_package_and_its_light_modules_stay_free_of_numpy() -> None:
    """spaCR promises that ``spacr.ops_layout`` imports without NumPy; the hook waits for a module
    the patch changes."""
    code = textwrap.dedent("""
        import sys
        import spacr, spacr.ops_layout
        print("numpy" in sys.modules, "spacr_accel_core" in sys.modules,
              [type(finder).__name__ for finder in sys.meta_path][0])
    """)
    assert _python(code, "1").stdout.split() == ["False", "False", "ImportHook"]


def test_the_hooks_modules_are_every_seam_tables_modules() -> None:
    assert frozenset().union(*(table.modules for table in TABLES.values())) == SPACR_MODULES
    assert PATCH_PACKAGE == "spacr_accel_core.patch"


PATCHED = """
import importlib, os, sys
if os.environ.get("INSTALL_FIRST"):
    from spacr_accel_core import patch
    patch.install()
first = importlib.import_module(os.environ["FIRST"])
loader = type(first.__spec__.loader).__qualname__, type(first.__loader__).__qualname__
from spacr_accel_core import patch
from spacr_accel_core.patch._table import SPACR_1_5
names = [(s.module, s.attribute) for s in SPACR_1_5.attributes]
names += [(s.module, f) for s in SPACR_1_5.scoped for f in s.functions]
replaced = [hasattr(getattr(importlib.import_module(m), a), "__spacr_accel_original__") for m, a in names]
hooks = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "ImportHook"]
print(repr((patch.installed(), loader, replaced, hooks)))
"""


@pytest.mark.parametrize("first", sorted(SPACR_MODULES))
def test_the_first_import_of_a_patched_module_patches_spacr_as_an_install_at_start(first: str) -> None:
    """Whichever module comes first, what it and the rest look like is what they look like when
    the program installed the patch before importing spaCR (names bound at import included)."""
    hooked = ast.literal_eval(_python(PATCHED, "1", FIRST=first).stdout)
    installed = ast.literal_eval(_python(PATCHED, None, FIRST=first, INSTALL_FIRST="1").stdout)
    assert hooked == installed
    assert installed[0] and all(installed[2]), installed
    plain = ast.literal_eval(_python(PATCHED, None, FIRST=first).stdout)
    assert not plain[0] and not any(plain[2]), "spaCR imported without the variable was patched"


def test_the_patch_package_imported_first_is_installed_and_left_as_its_own_loader_made_it() -> None:
    code = ("from spacr_accel_core import patch; "
            "print(patch.installed(), type(patch.__loader__).__name__, type(patch.__spec__.loader).__name__)")
    assert _python(code, "1").stdout.split() == ["True", "SourceFileLoader", "SourceFileLoader"]
    assert _python(code, None).stdout.split() == ["False", "SourceFileLoader", "SourceFileLoader"]


THREADS = """
import importlib, sys, threading
names = sorted({names})
barrier = threading.Barrier(len(names))
def load(name):
    barrier.wait()
    importlib.import_module(name)
threads = [threading.Thread(target=load, args=(name,)) for name in names]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
from spacr import ops_accel, ops_cycles, ops_register, ops_sbs
print(all(hasattr(f, "__spacr_accel_original__") for f in (ops_accel.maximum_filter, ops_cycles.phase_correlate,
      ops_register.phase_correlate, ops_sbs.extract_bases, ops_cycles.align_field)))
"""


@pytest.mark.parametrize("round_", range(3))
def test_threads_importing_spacr_at_once_are_all_patched(round_: int) -> None:
    names = [*SPACR_MODULES, PATCH_PACKAGE] if round_ else sorted(SPACR_MODULES)
    assert _python(THREADS.format(names=names), "1").stdout.strip() == "True"


SPAWNED = """
import multiprocessing, sys

def child(_):
    import numpy as np
    from spacr import ops_sbs
    ops_sbs.find_peaks(np.random.default_rng(0).random((32, 32), dtype=np.float32))
    patch = sys.modules.get("spacr_accel_core.patch")
    if patch is None:
        return False, 0
    return patch.installed(), sum(n for row in patch.report().seams for _b, n, _s in row.served)

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print([(installed, served > 0) for installed, served in pool.map(child, range(2))])
"""


def test_a_spawned_worker_that_only_imports_spacr_is_patched(tmp_path: Path) -> None:
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED, encoding="utf-8")
    for value, expected in (("1", "[(True, True), (True, True)]"), (None, "[(False, False), (False, False)]")):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                              env=_env(value), check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected, (value, done.stdout, done.stderr)


def test_an_unknown_word_is_warned_about_at_start_once_and_the_rest_still_patches() -> None:
    started = _python("pass", "1,fast")
    assert "SPACR_ACCEL_PATCH: ignoring 'fast'" in started.stderr, started.stderr
    code = "from spacr import ops_accel; print(hasattr(ops_accel.maximum_filter, '__spacr_accel_original__'))"
    patched = _python(code, "1,fast")
    assert patched.stdout.strip() == "True" and patched.stderr.count("ignoring 'fast'") == 1, patched.stderr


def test_keep_memory_is_applied_when_the_patch_installs() -> None:
    code = textwrap.dedent("""
        import sys
        before = "spacr_accel_core" in sys.modules
        from spacr import ops_accel
        from spacr_accel_core.patch import _heap
        print(before, [setting.applied for setting in _heap._applied], _heap._glibc() is not None)
    """)
    before, applied, glibc = _python(code, "1,keep-memory").stdout.split(maxsplit=2)
    assert before == "False" and applied == f"[{glibc.strip()}]"
    assert _python(code, "1").stdout.split(maxsplit=2)[1] == "[]"


def test_a_broken_patch_stops_neither_python_nor_spacrs_import(tmp_path: Path) -> None:
    broken = tmp_path / "spacr_accel_core" / "patch"
    broken.mkdir(parents=True)
    (broken.parent / "__init__.py").write_text("", encoding="utf-8")
    (broken / "__init__.py").write_text("raise RuntimeError('broken on purpose')\n", encoding="utf-8")
    code = ("from spacr import ops_accel; "
            "print(hasattr(ops_accel.maximum_filter, '__spacr_accel_original__'), callable(ops_accel.maximum_filter))")
    done = _python(code, "1", PYTHONPATH=str(tmp_path))
    assert done.stdout.split() == ["False", "True"]
    assert "the patch could not be installed (RuntimeError: broken on purpose)" in done.stderr, done.stderr
    assert _python("pass", "1", PYTHONPATH=str(tmp_path)).stderr == ""


def test_the_installed_startup_line_is_the_sources() -> None:
    installed = Path(sysconfig.get_paths()["purelib"]) / "spacr_accel_patch.pth"
    source = ROOT / "spacr_accel_core" / "src" / "spacr_accel_patch.pth"
    assert installed.read_text(encoding="utf-8") == source.read_text(encoding="utf-8"), \
        "the installed .pth is stale: reinstall spacr_accel_core"


_WORDS = ["1", "check", "strict", "report", "keep-memory", "free-memory"]
_KEYWORDS = {"1": None, "check": "check", "strict": "strict", "report": "report"}
_MEMORY = {"keep-memory": True, "free-memory": False}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([*_WORDS, "", "0", "off", "No", " CHECK ", "fast", "x1"]), min_size=1, max_size=6))
def test_the_variables_words(words: list[str]) -> None:
    """Off when every word is off; otherwise each mode set exactly when its word is given, in any
    case and spacing, ``keep_memory`` True or False by its word (None without one, and with both,
    which is warned about), and an unknown word named in a warning."""
    value = ",".join(words)
    cleaned = {word.strip().lower() for word in words}
    unknown = cleaned - {*_WORDS, "", "0", "false", "no", "off"}
    memory = {keep for word, keep in _MEMORY.items() if word in cleaned}
    expected_warnings = (["ignoring"] if unknown else []) + (["contradict"] if len(memory) > 1 else [])
    if expected_warnings:
        with pytest.warns(RuntimeWarning) as caught:
            modes = modes_from(value)
        assert all(any(text in str(seen.message) for seen in caught) for text in expected_warnings)
    else:
        modes = modes_from(value)
    if cleaned <= {"", "0", "no", "off"}:
        assert modes is None
        return
    assert modes == {**{keyword: word in cleaned for word, keyword in _KEYWORDS.items() if keyword},
                     "keep_memory": memory.pop() if len(memory) == 1 else None}
