"""``spacr-accel warm`` and the doctor's "Compiled kernels" on a fresh cache, and a call made while
numba still compiles: the floor serves it and says numba is waited for, and a seam kept above the
floor hands it to spaCR with that reason."""

from __future__ import annotations

import json
import re

import pytest

_NOT_YET = "not compiled yet (`spacr-accel warm`)"


def _unwrapped(text: str) -> str:
    """The doctor's text with its wrapped lines joined again."""
    return " ".join(text.split())


def _numba_row(doctor_json: str) -> dict[str, object]:
    rows = json.loads(doctor_json)["warm"]["rows"]
    return next(row for row in rows if row["name"] == "numba")


def test_warm_fills_a_fresh_cache_and_the_doctor_says_so(cold) -> None:
    doctor = cold.command("doctor")
    assert doctor.returncode == 0 and "Compiled kernels" in doctor.stdout
    assert f"numba: {_NOT_YET}; cache: {cold.folder}" in _unwrapped(doctor.stdout)
    assert _numba_row(cold.command("doctor", "--json").stdout)["state"] == _NOT_YET

    first = cold.command("warm", "--timeout", "170")
    assert first.returncode == 0, first.stderr[-3000:]
    assert re.search(r"^numba: 1 of 1 kernels ready in [\d.]+ s \(1 newly cached, 0 already cached\)",
                     first.stdout, re.MULTILINE), first.stdout
    progress = first.stderr.splitlines()  # not a terminal: one line per change, none rewritten
    assert "\r" not in first.stderr
    counted = [re.search(r"(\d) of 1 kernels", line).group(1) for line in progress if "kernels" in line]
    assert counted == ["0", "1"], first.stderr
    assert cold.ledger()["filter:float32"].compiled > 0

    doctor = cold.command("doctor")
    assert f"numba: ready; cache: {cold.folder}" in _unwrapped(doctor.stdout)
    row = _numba_row(cold.command("doctor", "--json").stdout)
    assert (row["state"], row["done"], row["total"]) == ("ready", 1, 1)

    again = cold.command("warm", "--timeout", "170")
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"^numba: all 1 kernels already cached; loaded in [\d.]+ s", again.stdout, re.MULTILINE)


def test_warm_with_a_timeout_it_cannot_meet_says_not_ready_and_fails(cold) -> None:
    short = cold.command("warm", "--timeout", "0.01", "--json")
    assert short.returncode == 1, short.stderr[-3000:]
    result = json.loads(short.stdout)
    row = next(row for row in result["rows"] if row["name"] == "numba")
    assert result["ok"] is False and row["ready"] is False and row["done"] == 0
    text = cold.command("warm", "--timeout", "0.01")
    assert text.returncode == 1 and re.search(r"^numba: NOT ready after [\d.]+ s: ", text.stdout, re.MULTILINE)
    # the compiler it started goes on after it (ended here by the fixture, or done already)
    cold.until(lambda: cold.holder() or "filter:float32" in cold.ledger(), "the compiler it left running", 60.0)


def test_a_call_while_numba_compiles_is_served_by_the_floor_and_says_so(cold) -> None:
    done = cold.python("""
        import numpy as np
        from spacr_accel_core import ops, last_dispatch
        from spacr_accel_core.dispatch._registry import REGISTRY
        ops.maximum_filter(np.ones((16, 16), np.float32), 3)
        print(last_dispatch().backend, last_dispatch().waiting, REGISTRY.last_waiting())
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[0] == "numpy ('numba',) ('numba',)"


def test_a_seam_above_the_floor_counts_the_call_as_numba_still_compiling(cold) -> None:
    pytest.importorskip("spacr")
    done = cold.python("""
        import numpy as np
        from spacr_accel_core import patch
        print(patch.install())
        from spacr import ops_cycles
        plane = np.random.default_rng(3).random((64, 64)).astype(np.float32)
        ops_cycles._clipped(plane)
        for seam in patch.report().seams:
            for reason, calls, _ in seam.passed:
                print(seam.seam, "|", reason, "|", calls)
    """, SPACR_ACCEL_NUMBA_KERNELS="science:levels")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "True"
    assert "spacr.ops_cycles._clipped | numba still compiling | 1" in lines[1:], done.stdout
    cold.until(lambda: cold.holder() or "science:levels" in cold.ledger(), "the compiler it left running", 60.0)
