"""What each of spaCR's tasks gets from the accelerator: the rows of the capabilities table.

The one place that knows about the tasks themselves (Cellpose segmentation, training, the three
primitives, cuML's clustering), so the walk and the cache stay free of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..contract._install import install_command
from ..contract._records import Accelerator
from ..dispatch._registry import REGISTRY
from ..operations._operations import OPERATIONS

SPACR_PRIMITIVES: Final = ("maximum_filter", "matmul", "nearest_neighbours")
"""``spacr.ops_accel``'s three primitives, whose rows follow spaCR's five in spaCR's own table, in
its order; the rest of the operations follow them in the table's order."""


def primitive_tasks() -> tuple[tuple[str, str], ...]:
    """One capabilities row per operation in the table, in its words, spaCR's three primitives first:
    read at each call, so an operation declared after this module was imported has its row too."""
    rows = tuple(OPERATIONS.values())
    first = [row for name in SPACR_PRIMITIVES for row in rows if row.name == name]
    return tuple((row.name, row.task) for row in (*first, *(row for row in rows if row not in first)))


def _device_words(found: Accelerator) -> str:
    return f"on {found.name or found.label}" if found.name else f"on the {found.label}"


def _model_rows(found: Accelerator) -> list[tuple[str, bool, str]]:
    """Cellpose, training and inference: torch work that goes wherever the accelerator is."""
    if not found.is_gpu:
        # The reason is the device note's (the doctor shows it once), not repeated on every row.
        unused = (f"; {found.name or found.label} is found, not used"
                  if found.detected and found.kind != "cpu" else "")
        return [
            ("Segmentation (Cellpose)", False, "CPU only: expect minutes per image" + unused),
            ("Model training", False, "CPU only: slow but works" + unused),
            ("Model inference / classification", False, "CPU only" + unused),
        ]
    where = _device_words(found)
    seg = where + ("" if found.bfloat16 else ", with float32 weights (this device refuses bfloat16)")
    if found.kind == "mps":
        seg += "; the flow-error pass runs on the CPU (a Cellpose indexing bug on Metal)"
    train = where
    if not found.autocast:
        train += ", in float32 (no mixed precision on this device)"
    if not found.float64:
        train += "; float64 stays on the CPU"
    infer = where + ("; missing operators fall back to the CPU" if found.fallback else "")
    return [
        ("Segmentation (Cellpose)", True, seg),
        ("Model training", True, train),
        ("Model inference / classification", True, infer),
    ]


def _primitive_rows() -> list[tuple[str, bool, str]]:
    """Which backend will run each primitive, and why the ones ranked above it will not."""
    statuses = REGISTRY.plugins()
    order = REGISTRY.backend_names(True)
    by_name = {s.name: s for s in statuses}
    rows = []
    for operation, task in primitive_tasks():
        chosen = next((by_name[n] for n in order if n in by_name
                       and operation in by_name[n].operations
                       and operation not in dict(by_name[n].faults)), None)
        if chosen is None:
            rows.append((task, False, f"no installed backend can run it (`{install_command()}` "
                                      "adds the NumPy one)"))
            continue
        passed = []
        for status in statuses:
            if status.name == chosen.name:
                continue
            if status.status != "ok":  # blocked or broken plugins have no priority: name them all
                why = f"{status.status}" + (f" ({status.reason})" if status.reason else "")
            elif status.priority <= chosen.priority:
                continue
            elif operation in dict(status.faults):
                why = f"faulty ({dict(status.faults)[operation]})"
            elif operation not in status.operations:
                why = "does not implement it"
            elif status.name not in order:
                why = "not in the backends in force"
            else:
                continue
            passed.append(f"{status.name}: {why}")
        detail = f"{chosen.name} backend, " + ("on the device" if chosen.accelerated else "on the CPU")
        if passed:
            detail += f"; passed over {'; '.join(passed)}"
        rows.append((task, chosen.accelerated, detail))
    return rows


SPACR_TASKS: Final = (
    "Segmentation (Cellpose)",
    "Model training",
    "Model inference / classification",
    "Live backdrop and spaceout",
    "UMAP / t-SNE / clustering",
)
"""spaCR's own rows, in its words and order: its setup screen and README generator match on them."""


def _cuml_row(found: Accelerator) -> tuple[str, bool, str]:
    # cuML IS NOT PORTABLE, and saying so is the point: RAPIDS ships for NVIDIA CUDA only (no AMD,
    # Intel or macOS build), so a user on Metal or ROCm should not wait for this to get faster.
    if found.is_cuda:
        return ("UMAP / t-SNE / clustering", True, "on the GPU via cuML")
    return ("UMAP / t-SNE / clustering", False, "CPU: cuML is built for NVIDIA CUDA only")


def _backdrop_row(system: str, environ: Mapping[str, str], gpus: int) -> tuple[str, bool, str]:
    """spaCR's live backdrop and spaceout view: OpenGL, so accelerated where a GPU draws a display.

    A guess, said as one: nothing here opens a window. macOS and Windows always draw their desktop
    on a GPU; Linux does where a display is set and the OS lists a GPU (else Mesa's software
    renderer draws it on the CPU).

    :param system: ``platform.system()``.
    :param environ: the environment (``DISPLAY``, ``WAYLAND_DISPLAY``).
    :param gpus: how many GPUs the host inventory lists.
    """
    task = "Live backdrop and spaceout"
    if system in ("Darwin", "Windows"):
        return (task, True, "OpenGL on the desktop's GPU")
    if not (environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")):
        return (task, False, "no display here (DISPLAY and WAYLAND_DISPLAY unset): the view needs one")
    if not gpus:
        return (task, False, "OpenGL in software: the OS lists no GPU")
    return (task, True, "OpenGL on the display's GPU")
