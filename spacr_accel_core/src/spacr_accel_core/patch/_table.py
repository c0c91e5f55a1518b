"""Where each released spaCR calls what the registry serves: one table per version verified, one row
per seam. A row names the spaCR attribute, how it is served (the function that serves it, in a
``_served*`` module) and when it may be (its floor rule, :mod:`._floor`); the installer
(:mod:`._install`) reads nothing else.

Each row was read off that version's own modules and is tested against it: how the name is bound
matters as much as where it lives. ``ops_sbs.find_peaks`` imports ``maximum_filter`` from
``ops_accel`` inside the function (looked up per call), ``ops_cycles`` binds ``phase_correlate``
from ``ops_register`` at its own import (so the patch reaches that binding too), and
``ops_engine._decode_field`` imports ``ndimage`` from SciPy inside the function, which is why SciPy
is replaced there for that function's imports alone, never in ``scipy.ndimage`` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _served
from ._floor import AT_FLOOR, FloorRule, only_above
from ._served_align import align_field
from ._served_levels import clipped, sbs_mean_target
from ._served_nuclei import nuclear_points
from ._served_planes import estimate_read_locations, translate
from ._served_points import attribute_reads, seed_by_scaled_pairs
from ._served_reading import read_plane
from ._served_register import NUMPY, SURFACES, in_place_of, phase_correlate
from ._served_triangles import align_by_triangles
from ._served_worker import init_decode_worker

__all__ = ["TABLES", "Scoped", "Seam", "SeamTable", "Surface", "table_for"]

Serve = Callable[..., tuple[Any, str]]
"""A way of serving: the signature of the function it stands in for (plus the context keywords its
row asks for), returning ``(answer, backend)`` or raising :class:`._outcome.PassThrough`."""


@dataclass(frozen=True)
class Seam:
    """One seam: a name spaCR's code calls, how the patch serves it, and when it may.

    :param module: the spaCR module holding the name (for a scoped seam, the module whose
        functions import SciPy).
    :param attribute: the name (for a scoped seam, the ``scipy.ndimage`` function).
    :param serve: the function that serves it (:data:`Serve`).
    :param floor: when it may be served: by any backend (:data:`._floor.AT_FLOOR`), or only above
        the NumPy floor (:func:`._floor.only_above`); a rule above the floor is handed to ``serve``
        as its ``floor`` keyword.
    :param context: extra keywords ``serve`` is given: ``"original"`` (spaCR's own function),
        ``"register"`` (the module holding spaCR's table of surfaces, ``spacr.ops_register``, whose
        backend order spaCR consults), ``"accel"`` or ``"module"`` (the module holding the name,
        whose other functions the way calls).
    :param within: for a scoped seam, the functions of ``module`` whose own
        ``from scipy import ndimage`` is given a stand-in serving ``attribute``; empty for a module
        attribute, replaced where it lives.
    """

    module: str
    attribute: str
    serve: Serve
    floor: FloorRule = AT_FLOOR
    context: tuple[str, ...] = ()
    within: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The seam's name in the report."""
        if self.within:
            return f"{self.module}: scipy.ndimage.{self.attribute}"
        return f"{self.module}.{self.attribute}"


@dataclass(frozen=True)
class Scoped:
    """spaCR functions whose own ``from scipy import ndimage`` is given one stand-in, and the scoped
    seams it serves (every other ``scipy.ndimage`` name is SciPy's own).

    :param module: the spaCR module defining them.
    :param functions: their names in it.
    :param seams: the rows of the ``scipy.ndimage`` functions the stand-in serves.
    """

    module: str
    functions: tuple[str, ...]
    seams: tuple[Seam, ...]


@dataclass(frozen=True)
class Surface:
    """spaCR's table of correlation surfaces, whose NumPy entry the patch stands in for (spaCR's
    ``phase_correlate`` then computes its surface with the kit's arithmetic, inside the seam's call).

    :param module: the spaCR module holding the table (also the ``"register"`` context of a row).
    :param table: the table's name in it.
    :param entry: the entry replaced.
    :param stand_in: ``stand_in(spacrs) -> function``: the entry while the patch is installed.
    """

    module: str
    table: str
    entry: str
    stand_in: Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class SeamTable:
    """Every seam of one spaCR release line.

    :param name: the release line, e.g. ``"1.5"``.
    :param seams: one row per seam: module attributes replaced first, then the scoped seams, in
        the report's order.
    :param surface: the table of correlation surfaces that gains the patch's stand-in.
    """

    name: str
    seams: tuple[Seam, ...]
    surface: Surface

    @property
    def attributes(self) -> tuple[Seam, ...]:
        """The rows of module attributes replaced where they live."""
        return tuple(seam for seam in self.seams if not seam.within)

    @property
    def scoped(self) -> tuple[Scoped, ...]:
        """The scoped rows grouped by the functions they are scoped to, in the table's order."""
        groups: dict[tuple[str, tuple[str, ...]], list[Seam]] = {}
        for seam in self.seams:
            if seam.within:
                groups.setdefault((seam.module, seam.within), []).append(seam)
        return tuple(Scoped(module, functions, tuple(rows)) for (module, functions), rows in groups.items())

    @property
    def modules(self) -> frozenset[str]:
        """Every spaCR module the table touches."""
        return frozenset({*(seam.module for seam in self.seams), self.surface.module})

    @property
    def names(self) -> tuple[str, ...]:
        """Every seam's report name, in the table's order."""
        return tuple(seam.name for seam in self.seams)


_REGISTER = ("original", "register")
_DECODE = ("_decode_field",)

SPACR_1_5 = SeamTable(
    name="1.5",
    seams=(
        Seam("spacr.ops_accel", "maximum_filter", _served.maximum_filter, context=("accel",)),
        Seam("spacr.ops_accel", "matmul", _served.matmul),
        Seam("spacr.ops_accel", "nearest_neighbours", _served.nearest_neighbours, context=("original", "accel")),
        Seam("spacr.ops_register", "phase_correlate", phase_correlate, context=_REGISTER),
        Seam("spacr.ops_cycles", "phase_correlate", phase_correlate, context=_REGISTER),
        Seam("spacr.ops_sbs", "extract_bases", _served.extract_bases, context=("original",)),
        Seam("spacr.ops_sbs", "attribute_reads", attribute_reads, context=("original",)),
        Seam("spacr.ops_phenotype", "seed_by_scaled_pairs", seed_by_scaled_pairs, context=("original",)),
        Seam("spacr.ops_cycles", "_translate", translate, floor=only_above("translate")),
        Seam("spacr.ops_cycles", "align_field", align_field, context=("original", "module")),
        Seam("spacr.ops_cycles", "_clipped", clipped, floor=only_above("percentiles"), context=("original",)),
        Seam("spacr.ops_cycles", "sbs_mean_target", sbs_mean_target),
        Seam("spacr.ops_sbs", "estimate_read_locations", estimate_read_locations),
        Seam("spacr.ops_merge", "align_by_triangles", align_by_triangles, context=("original",)),
        Seam("spacr.ops_phenotype", "nuclear_points", nuclear_points),
        Seam("spacr.ops_engine", "_read_plane", read_plane, context=("original", "module")),
        Seam("spacr.ops_engine", "_init_decode_worker", init_decode_worker, context=("original",)),
        Seam("spacr.ops_engine", "gaussian_laplace", _served.gaussian_laplace, floor=only_above("gaussian_laplace"),
             within=_DECODE),
        Seam("spacr.ops_engine", "minimum_filter", _served.minimum_filter, within=_DECODE),
        Seam("spacr.ops_phenotype", "gaussian_filter", _served.gaussian_filter, floor=only_above("gaussian_filter"),
             within=("nuclear_points",)),
    ),
    surface=Surface("spacr.ops_register", SURFACES, NUMPY, in_place_of),
)

TABLES: dict[str, SeamTable] = {"1.5": SPACR_1_5}
"""Release line -> its verified table. A spaCR outside every line here is patched nowhere."""


def table_for(version: str) -> SeamTable | None:
    """The table of the release line ``version`` belongs to (``"1.5.1.5"`` -> ``"1.5"``), if any."""
    parts = version.split(".")
    return TABLES.get(".".join(parts[:2])) if len(parts) >= 2 else None
