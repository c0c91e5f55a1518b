"""The doctor's summary and versions: what a lab user pastes into a bug report first (part of
``spacr-accel doctor``; the rest of the report is :mod:`._doctor`)."""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import sys
from typing import Any

Report = dict[str, Any]

CUPY_DISTRIBUTIONS = ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy-rocm-6-0", "cupy-rocm-5-0", "cupy")
"""The names CuPy's wheels are published under, one per CUDA/ROCm line."""


VERSION_KEYS = ("python", "numpy", "torch", "torch_build", "cupy", "numba", "driver")
"""The versions section's keys: what a maintainer asks for first in a bug report."""


def _dist_version(name: str) -> str | None:
    """An installed distribution's version from its metadata (nothing is imported), or None.

    Read first from the ``name-version.dist-info`` folder names on ``sys.path`` (one directory
    listing per path entry, shared by every look-up), since parsing each METADATA file costs
    tens of milliseconds on a busy machine; :mod:`importlib.metadata` answers otherwise.
    """
    import importlib.metadata

    folders = _dist_folders()
    found = folders.get(re.sub(r"[-_.]+", "_", name).lower())
    if found is not None or folders:  # the folders are the installed set: absent means absent
        return found
    try:
        return importlib.metadata.version(name)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


_FOLDERS: dict[str, str] | None = None


def _dist_folders() -> dict[str, str]:
    """``{normalised name: version}`` from the ``.dist-info`` (and legacy ``.egg-info``) folders on
    ``sys.path``, the first on the path winning as it does for an import."""
    global _FOLDERS  # noqa: PLW0603  (one listing per process: the doctor runs once)
    if _FOLDERS is None:
        folders: dict[str, str] = {}
        for entry in sys.path:
            try:
                names = os.listdir(entry or ".")
            except OSError:
                continue
            for folder in names:
                stem = folder.removesuffix(".dist-info").removesuffix(".egg-info")
                if stem != folder and "-" in stem:
                    project, _, version = stem.partition("-")
                    folders.setdefault(re.sub(r"[-_.]+", "_", project).lower(), version.split("-py")[0])
        _FOLDERS = folders
    return _FOLDERS


def _torch_build(version: str | None) -> str | None:
    """Which compute platform the installed torch was built for, without importing it.

    An already-imported torch says it exactly (``torch.version.cuda``/``hip``); otherwise the
    wheel's local label does (``+cu121``, ``+rocm6.2``, ``+cpu``), and a label-less Linux wheel
    from PyPI is a CUDA build whose runtime arrives as ``nvidia-cuda-runtime-cu12``.
    """
    if version is None:
        return None
    loaded = sys.modules.get("torch")
    built = getattr(loaded, "version", None)
    if built is not None:
        hip, cuda = getattr(built, "hip", None), getattr(built, "cuda", None)
        return f"ROCm {hip}" if hip else f"CUDA {cuda}" if cuda else "CPU-only"
    label = version.partition("+")[2]
    if label == "cpu":
        return "CPU-only"
    match = re.fullmatch(r"cu(\d+)(\d)", label)
    if match:
        return f"CUDA {match.group(1)}.{match.group(2)}"
    if label.startswith("rocm"):
        return f"ROCm {label[4:]}"
    for runtime in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime"):
        found = _dist_version(runtime)
        if found:
            return f"CUDA {'.'.join(found.split('.')[:2])} (from {runtime})"
    return "CPU-only" if sys.platform == "darwin" else None


def _versions(report: Report) -> Report:
    """Python, numpy, torch and its build, CuPy, numba and the GPU driver, read from metadata."""
    torch = _dist_version("torch")
    cupy = next(((name, v) for name in CUPY_DISTRIBUTIONS if (v := _dist_version(name))), None)
    drivers = sorted({f"{r['driver']} {r['driver_version']}".strip()
                      for r in report["host_devices"]["rows"] if r.get("driver") or r.get("driver_version")})
    return {
        "python": platform.python_version(),
        "numpy": _dist_version("numpy"),
        "torch": torch,
        "torch_build": _torch_build(torch),
        "cupy": f"{cupy[1]} ({cupy[0]})" if cupy else None,
        "numba": _dist_version("numba"),
        "driver": ", ".join(drivers) or None,
    }


def _host_devices() -> Report:
    """The GPUs and NPUs the operating system lists, and those plugins add."""
    from .. import accelerator

    return {"rows": [dataclasses.asdict(device) for device in accelerator.host_devices()]}


def _memory() -> Report:
    """Free and total memory per device (``None`` where unknown)."""
    from .. import accelerator

    return {"rows": [dataclasses.asdict(row) for row in accelerator.memory()]}


_SHORT = re.compile(r"^(.*?)(?:;|, with |, in float32| \(|$)")


def _runs_on(row: Report) -> str:
    """Where one task runs, in a few words: the first clause of its detail."""
    detail = str(row["detail"])
    match = _SHORT.match(detail)
    first = (match.group(1) if match else detail).strip() or detail
    return first


def _where(row: Report, gpu: str) -> str:
    """``GPU (NVIDIA A100)``, ``CPU (numpy backend)`` or ``CPU``: where one task runs, in a word."""
    backend = re.match(r"([\w.-]+) backend", str(row["detail"]))
    where = "GPU" if row["accelerated"] else "CPU"
    if backend:
        return f"{where} ({backend.group(1)} backend)"
    return f"{where} ({gpu})" if row["accelerated"] and gpu else where


def _summary(report: Report) -> Report:
    """What this machine has, what each task runs on, and the one thing to fix (if any)."""
    device = report["device"]
    hosts = report["host_devices"]["rows"]
    listed = [f"{r['name']} ({r['kind'].upper()})" for r in hosts]
    machine = (", ".join(listed) if listed else "no GPU or NPU listed by the operating system")
    machine += f"; {os.cpu_count() or 1} CPU threads"
    if device.get("kind") is None:
        in_use = "unknown (see the device section)"
    elif device.get("is_gpu"):
        in_use = str(device.get("label"))
    elif device.get("detected") and device.get("kind") != "cpu":
        in_use = f"the CPU: {device.get('name') or device.get('label')} is found, not used"
    else:
        in_use = "the CPU"
    gpu = str(device.get("name") or device.get("label") or "") if device.get("is_gpu") else ""
    tasks = [{"task": r["task"], "accelerated": r["accelerated"], "runs_on": _where(r, gpu)}
             for r in report["capabilities"]["rows"]]
    return {"machine": machine, "device": in_use, "tasks": tasks, "fix": _fix(report)}


def _fix(report: Report) -> str | None:
    """The one thing to fix: an unusable device first, then a broken plugin, then a failed section."""
    device = report["device"]
    if device.get("detected") and not device.get("usable") and device.get("kind") not in (None, "cpu"):
        return str(device.get("note") or "the device is found but not usable")
    for row in report["faulty"]:
        return f"the {row['name']} plugin is faulty: {row['reason'] or 'it broke at run time'}"
    for key in ("device", "capabilities", "plugins"):
        if report[key].get("error"):
            return f"the {key} section failed: {report[key]['error']}"
    return None


# ---- text ------------------------------------------------------------------------------------
