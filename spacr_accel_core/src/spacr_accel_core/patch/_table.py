"""Where each released spaCR calls what the registry serves: one table per version verified.

Each row was read off that version's own modules and is tested against it: how the name is bound
matters as much as where it lives. ``ops_sbs.find_peaks`` imports ``maximum_filter`` from
``ops_accel`` inside the function (looked up per call), ``ops_cycles`` binds ``phase_correlate``
from ``ops_register`` at its own import (so the patch reaches that binding too), and
``ops_engine._decode_field`` imports ``ndimage`` from SciPy inside the function, which is why SciPy
is replaced there for that function's imports alone, never in ``scipy.ndimage`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TABLES", "Scoped", "Seam", "SeamTable", "table_for"]


@dataclass(frozen=True)
class Seam:
    """A module attribute spaCR's code calls, replaced by a function that serves it.

    :param module: the spaCR module holding the name.
    :param attribute: the name.
    :param way: the key of :data:`._served.SERVED` that serves it.
    :param context: extra keywords the way is given: ``"original"`` (spaCR's own function),
        ``"register"`` (the ``spacr.ops_register`` module, whose backend order spaCR consults),
        ``"accel"`` or ``"module"`` (the module holding the name, whose other functions the way calls).
    """

    module: str
    attribute: str
    way: str
    context: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.module}.{self.attribute}"


@dataclass(frozen=True)
class Scoped:
    """spaCR functions whose own ``from scipy import ndimage`` is given a stand-in.

    :param module: the spaCR module defining them.
    :param functions: their names in it.
    :param replaced: the ``scipy.ndimage`` functions the stand-in serves; every other name is
        SciPy's own.
    """

    module: str
    functions: tuple[str, ...]
    replaced: tuple[str, ...]

    def seam(self, function: str) -> str:
        return f"{self.module}: scipy.ndimage.{function}"


@dataclass(frozen=True)
class SeamTable:
    """Every seam of one spaCR release line.

    :param name: the release line, e.g. ``"1.5"``.
    :param seams: module attributes replaced.
    :param scoped: functions given a scoped SciPy.
    :param surfaces: the module whose table of correlation surfaces gains the patch's surface.
    """

    name: str
    seams: tuple[Seam, ...]
    scoped: tuple[Scoped, ...]
    surfaces: str

    @property
    def modules(self) -> frozenset[str]:
        """Every spaCR module the table touches."""
        return frozenset({*(seam.module for seam in self.seams), *(scoped.module for scoped in self.scoped),
                          self.surfaces})

    @property
    def names(self) -> tuple[str, ...]:
        """Every seam's report name, in the table's order."""
        return (*(seam.name for seam in self.seams),
                *(scoped.seam(function) for scoped in self.scoped for function in scoped.replaced))


_REGISTER = ("original", "register")

SPACR_1_5 = SeamTable(
    name="1.5",
    seams=(
        Seam("spacr.ops_accel", "maximum_filter", "maximum_filter", ("accel",)),
        Seam("spacr.ops_accel", "matmul", "matmul"),
        Seam("spacr.ops_accel", "nearest_neighbours", "nearest_neighbours", ("original", "accel")),
        Seam("spacr.ops_register", "phase_correlate", "phase_correlate", _REGISTER),
        Seam("spacr.ops_cycles", "phase_correlate", "phase_correlate", _REGISTER),
        Seam("spacr.ops_sbs", "extract_bases", "extract_bases", ("original",)),
        Seam("spacr.ops_sbs", "attribute_reads", "attribute_reads", ("original",)),
        Seam("spacr.ops_phenotype", "seed_by_scaled_pairs", "seed_by_scaled_pairs", ("original",)),
        Seam("spacr.ops_cycles", "_translate", "translate"),
        Seam("spacr.ops_cycles", "align_field", "align_field", ("original", "module")),
        Seam("spacr.ops_cycles", "_clipped", "clipped", ("original",)),
        Seam("spacr.ops_cycles", "sbs_mean_target", "sbs_mean_target"),
        Seam("spacr.ops_sbs", "estimate_read_locations", "spot_score"),
        Seam("spacr.ops_merge", "align_by_triangles", "align_by_triangles", ("original",)),
        Seam("spacr.ops_phenotype", "nuclear_points", "nuclear_points"),
        Seam("spacr.ops_engine", "_read_plane", "read_plane", ("original", "module")),
    ),
    scoped=(
        Scoped("spacr.ops_engine", ("_decode_field",), ("gaussian_laplace", "minimum_filter")),
        Scoped("spacr.ops_phenotype", ("nuclear_points",), ("gaussian_filter",)),
    ),
    surfaces="spacr.ops_register",
)

TABLES: dict[str, SeamTable] = {"1.5": SPACR_1_5}
"""Release line -> its verified table. A spaCR outside every line here is patched nowhere."""


def table_for(version: str) -> SeamTable | None:
    """The table of the release line ``version`` belongs to (``"1.5.1.5"`` -> ``"1.5"``), if any."""
    parts = version.split(".")
    return TABLES.get(".".join(parts[:2])) if len(parts) >= 2 else None
