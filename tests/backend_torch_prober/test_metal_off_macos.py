"""``inspect_torch`` believes the module it is given: an available Metal is Metal on any host.

spaCR exercises its Metal diagnosis with stand-in modules on Linux CI; the host may only shape
the explanation of an UNAVAILABLE Metal, never overrule the module's answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from spacr_accel_core.accelerator import inspect_torch


@pytest.mark.parametrize("system", ["Linux", "Windows"])
def test_an_available_metal_is_believed_off_macos(stand_in: Any, on_host: Any, system: str) -> None:
    on_host(system, "x86_64", "", gpu="Metal GPU")
    found = inspect_torch(stand_in.torch(mps=stand_in.Mps()))
    assert (found.kind, found.device, found.detected, found.usable) == ("mps", "mps", True, True)
    assert found.is_gpu and not found.is_cuda and not found.float64 and not found.autocast
    assert found.label == "Metal GPU (Apple Metal)"


def test_the_host_default_is_linux_and_metal_is_still_believed(stand_in: Any) -> None:
    # The folder's conftest fakes a Linux host for every test: no monkeypatching of the OS needed.
    found = inspect_torch(stand_in.torch(mps=stand_in.Mps()), device_names=False)
    assert (found.kind, found.device) == ("mps", "mps")


def test_an_unavailable_metal_is_explained_only_on_macos(stand_in: Any, on_host: Any) -> None:
    torch = stand_in.torch(mps=stand_in.Mps(available=False, built=True))
    assert inspect_torch(torch).kind == "cpu"  # Linux: nothing to explain, nothing reported
    on_host("Darwin", "arm64", "14.4")
    found = inspect_torch(torch)
    assert (found.kind, found.detected, found.usable) == ("mps", True, False)
    assert "macOS offers it no Metal device" in found.note
