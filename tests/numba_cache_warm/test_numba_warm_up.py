"""The warm-up: no call waits for numba; the floor answers until a kernel is compiled; a failure to
compile makes the backend decline with the reason, and a missing numba makes it unusable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from spacr_accel_numba import _plugin

_ONLY_CPU = {**os.environ, "SPACR_ACCEL_DISABLE": "torch,cupy,opencv,openvino"}


def _run(code: str, **extra: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**_ONLY_CPU, **extra}, timeout=300, check=True)
    return done.stdout.splitlines()


def test_the_first_call_is_answered_by_the_floor_and_imports_no_numba(tmp_path: os.PathLike[str]) -> None:
    # An empty cache of its own: a kernel already cached would be loaded by the call itself.
    lines = _run("""
        import sys, numpy as np
        from spacr_accel_core import ops, last_dispatch
        field = np.ones((64, 64), np.float32)
        ops.maximum_filter(field, 3)
        first = last_dispatch()
        print(first.backend)
        print(dict(first.declined).get("numba", ""))
        print("numba" in sys.modules)  # the warm-up waits half a second before it imports numba
        import spacr_accel_numba
        print(spacr_accel_numba.warm(timeout=240))
        ops.maximum_filter(field, 3)
        print(last_dispatch().backend)
    """, NUMBA_CACHE_DIR=os.fspath(tmp_path), SPACR_ACCEL_NUMBA_KERNELS="filter:float32")
    assert lines[0] == "numpy"
    assert "still compiling" in lines[1]
    assert lines[2:] == ["False", "True", "numba"]


def test_a_failure_to_compile_is_a_decline_with_the_reason() -> None:
    lines = _run("""
        import numpy as np
        from spacr_accel_core import ops, last_dispatch, plugins, refresh
        from spacr_accel_numba import _warm
        def broken():
            raise RuntimeError("LLVM is not here")
        _warm._jobs = lambda: [("filter:float32", broken)]
        print(_warm.warm(timeout=240), _warm.failure())
        field = np.ones((8, 8), np.float32)
        ops.maximum_filter(field, 3)
        print(last_dispatch().backend, "|", dict(last_dispatch().declined)["numba"])
        try:
            ops.maximum_filter(field, 3, backend="numba")
        except RuntimeError as exc:
            print(type(exc).__name__, "|", exc)
        refresh()
        print(next(r for r in plugins() if r.name == "numba").reason)
    """)
    assert lines[0] == "False RuntimeError: LLVM is not here"
    # asked what it is only now, after the failure, it says it is unusable, and why
    assert lines[1] == "numpy | unusable: numba could not compile here (RuntimeError: LLVM is not here)"
    assert lines[2].startswith("BackendUnavailable |") and "LLVM is not here" in lines[2]
    assert "numba could not compile here" in lines[3]


def test_without_numba_the_backend_is_unusable_and_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_plugin.importlib.util, "find_spec", lambda name: None)
    info = _plugin.spacr_accel_backend_info()
    assert info.usable is False and "numba is not installed" in info.note
    declared = _plugin.SPACR_ACCEL_PLUGIN  # what it is stays declared, numba or not
    assert (declared.name, declared.priority, declared.accelerated) == ("numba", 120.0, False)


def test_spacrs_decode_kernels_are_compiled_before_the_searches_and_the_rarer_dtypes() -> None:
    # A process serves with the kernels compiled so far, a prefix of this order: the ones a
    # decode of spaCR's calls come first, so a short first process leaves them cached.
    from spacr_accel_numba import _warm

    names = [name for name, _ in _warm._jobs()]
    decode = ["filter:float32", "science:levels", "science:planes", "science:decode", "science:points",
              "science:smooth"]
    assert names[:len(decode)] == decode
    assert set(names[len(decode):]) == {"science:peaks", "nearest", "nearest:wide", "science:knearest",
                                        "science:hamming", "filter:uint16", "filter:uint8"}
    assert names[-2:] == ["filter:uint16", "filter:uint8"]
