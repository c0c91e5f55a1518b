"""Edges where one bad input or one broken distribution used to cost every later call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from spacr_accel_core import ops


def test_a_huge_window_is_answered_and_costs_nothing_later(private, numpy_plugin):
    private.register(numpy_plugin, "numpy")
    field = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(ops.maximum_filter(field, 10**10), np.full((3, 4), 11, np.float32))
    assert np.array_equal(ops.maximum_filter(field, 10**5 + 1), np.full((3, 4), 11, np.float32))
    assert ops.maximum_filter(field, 3)[0].tolist() == [5, 6, 7, 7]
    assert all(not row.faults for row in private.plugins())


def test_the_floor_is_never_quarantined(private, numpy_plugin, monkeypatch):
    from spacr_accel_numpy import _filters  # the family's module: its hook calls the windowed maximum

    calls = []
    real = _filters.window_maximum

    def flaky(field, size):
        calls.append(size)
        if size == 5:
            raise TypeError("a bug that only this input reaches")
        return real(field, size)

    monkeypatch.setattr(_filters, "window_maximum", flaky)
    private.register(numpy_plugin, "numpy")
    field = np.ones((4, 4))
    try:
        ops.maximum_filter(field, 5)
    except RuntimeError as exc:
        assert "a bug that only this input reaches" in str(exc)
    else:
        raise AssertionError("the fault must reach this caller")
    assert ops.maximum_filter(field, 3).shape == (4, 4)  # still served afterwards
    assert calls == [5, 3]


def test_a_plugin_named_numpy_is_not_the_floor(kit, private, numpy_plugin):
    """The floor is whatever declares ``try_last``, not whatever is called numpy."""
    impostor = kit.make_plugin("numpy", priority=100.0, maximum_filter=kit.raising(TypeError("impostor")))
    private.register(impostor, "numpy")
    with pytest.raises(RuntimeError, match="no usable backend"):
        ops.maximum_filter(np.ones((4, 4)), 3)
    with pytest.raises(RuntimeError, match="no usable backend"):  # an impostor is quarantined like any
        ops.maximum_filter(np.ones((4, 4)), 3)
    assert impostor.calls["maximum_filter"] == 1


def test_a_read_only_or_aliased_result_is_not_written_to(kit, private, numpy_plugin):
    def read_only(field, size):
        out = np.full(field.shape, -0.0, np.float32)
        out.setflags(write=False)
        return out

    private.register(kit.make_plugin("frozen", maximum_filter=read_only), "frozen")
    private.register(numpy_plugin, "numpy")
    got = ops.maximum_filter(np.zeros((3, 3), np.float32), 3)
    assert private.last_dispatch().backend == "frozen"
    assert not np.signbit(got).any()

    private.unregister("frozen")
    private.register(kit.make_plugin("echo", maximum_filter=lambda field, size: field), "echo")
    private.refresh()
    field = np.full((3, 3), -0.0, np.float32)
    got = ops.maximum_filter(field, 3)
    assert private.last_dispatch().backend == "echo"
    assert np.signbit(field).all(), "the caller's array was changed"
    assert not np.signbit(got).any()


def test_a_prober_that_states_a_priority_is_not_a_backend(kit, private, numpy_plugin):
    prober = kit.make_plugin("myprober", priority=900.0)  # backend_info, but no primitive
    private.register(prober, "myprober")
    private.register(numpy_plugin, "numpy")
    assert ops.accelerated_backends() == ("numpy",)
    assert next(name for name, _ in private.hookimpls("spacr_accel_backend_info")) == "myprober"


def test_a_malformed_entry_points_file_elsewhere_breaks_no_call(tmp_path):
    """A broken third-party wheel's metadata costs that distribution, not every call."""
    info = tmp_path / "site" / "broken_meta-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-meta\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[spacr_accel]\nthis line has no equals sign\n")
    code = textwrap.dedent(
        """
        import json
        import numpy as np
        import spacr_accel_core
        from spacr_accel_core import ops
        out = ops.matmul(np.eye(2), np.ones((2, 2)))
        rows = {p.name: (p.status, p.distribution) for p in spacr_accel_core.plugins()}
        print(json.dumps({"sum": float(out.sum()), "rows": rows,
                          "served": spacr_accel_core.last_dispatch().backend}))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), SPACR_ACCEL_DISABLE="torch,cupy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["sum"] == 4.0 and result["served"] == "numpy"
    assert result["rows"]["(broken-meta)"] == ["faulty", "broken-meta"]
    assert result["rows"]["numpy"][0] == "ok"


def test_a_backend_info_that_calls_the_ops_is_told_why(kit, private, numpy_plugin):
    """Re-entering discovery from backend_info names the mistake instead of recursing."""
    def impatient():
        ops.matmul(np.eye(2), np.eye(2))  # asks the registry that is being built
        raise AssertionError("unreachable: the call above must raise")

    private.register(kit.make_plugin("impatient", info=impatient, matmul=kit.reference_matmul), "impatient")
    private.register(numpy_plugin, "numpy")
    assert ops.matmul(np.eye(2), np.ones((2, 2))).sum() == 4.0
    row = next(p for p in private.plugins() if p.name == "impatient")
    assert row.status == "unusable" and "must not call the ops" in row.reason
