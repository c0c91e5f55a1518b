"""Whether torch is worth importing is read off the OS first: no device node, no question."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spacr_accel_torch import _nodes, _plugin


def test_linux_without_any_device_node_needs_no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(_nodes.os.path, "exists", lambda _path: False)
    monkeypatch.setattr(_nodes.glob, "glob", lambda _pattern: [])
    why = _nodes._no_device_node()
    assert why is not None and "no GPU device node" in why
    info = _plugin.spacr_accel_backend_info()
    assert not info.usable and "no GPU device node" in info.note


@pytest.mark.parametrize("node", ["/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg"])
def test_any_driver_node_means_torch_is_asked(monkeypatch: pytest.MonkeyPatch, node: str) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(_nodes.os.path, "exists", lambda path: path == node)
    monkeypatch.setattr(_nodes.glob, "glob", lambda _pattern: [])
    assert _nodes._no_device_node() is None


def test_a_render_node_means_torch_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Intel GPUs (XPU) and AMD cards show a DRM render node."""
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(_nodes.os.path, "exists", lambda _path: False)
    monkeypatch.setattr(_nodes.glob, "glob",
                        lambda pattern: ["/dev/dri/renderD128"] if pattern == "/dev/dri/renderD*" else [])
    assert _nodes._no_device_node() is None


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_macos_and_windows_are_always_asked(monkeypatch: pytest.MonkeyPatch, platform: str) -> None:
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(_nodes.os.path, "exists", lambda _path: False)
    assert _nodes._no_device_node() is None


def test_a_first_call_here_never_imports_torch() -> None:
    """End to end in a fresh process with every backend installed: torch stays unimported."""
    code = (
        "import sys, numpy as np\n"
        "from spacr_accel_core import ops, last_dispatch\n"
        "ops.maximum_filter(np.ones((8, 8)), 3)\n"
        "ops.matmul(np.ones((2, 2)), np.ones((2, 2)))\n"
        "ops.nearest_neighbours(np.ones((2, 2)), np.ones((3, 2)))\n"
        "print('torch' in sys.modules, 'cupy' in sys.modules, last_dispatch().backend)\n"
    )
    if _nodes._no_device_node() is None:
        pytest.skip("this machine shows a GPU device node: torch is rightly asked here")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    torch_imported, cupy_imported, backend = out.stdout.split()
    assert (torch_imported, cupy_imported) == ("False", "False"), out.stderr
    # the floor, or numba where its kernel cache is complete (a cached kernel serves the first call)
    assert backend in ("numpy", "numba"), out.stderr
