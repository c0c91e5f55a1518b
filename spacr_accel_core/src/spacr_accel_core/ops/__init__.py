"""The array operations spaCR's slow steps are made of, on whatever hardware there is.

A drop-in for ``spacr.ops_accel``. Strip the science away and peak finding, spectral unmixing and
cell matching are a windowed maximum, a matrix multiply and a nearest-neighbour search; they live
here so ONE place knows about devices and the modules that use them go on reading as the science
they are. Around them sit the calls the science makes of them: peaks as coordinates
(:func:`local_maxima`), the k nearest within a distance, binary descriptors (``metric="hamming"``)
and mutual matching (:func:`mutual_nearest_neighbours`).

EVERY FUNCTION TAKES AND RETURNS NUMPY, and every backend gives the same answer: the windowed
maximum bit for bit, the nearest neighbours exactly (ties to the lowest index), the product to
float32 rounding. Input is checked here, once, before any backend runs, so a wrong call fails
with a message that names the argument rather than with a device traceback.

AND IT NEVER ASSUMES THE CARD IS FREE. ``gpu=False`` refuses a device that exists, and a backend
that raises at run time (an out-of-memory, a driver that went away) falls through to the next.
THE CPU PATH IS NOT AN ERROR PATH: it is what runs on a laptop, in CI and beside a busy card.

THE PACKAGE BY FAMILY. This module is the face; each operation is declared once, with its hook's
specification and its table row (:func:`~spacr_accel_core.operations._operations.operation`), in the
module of its family:

- ``_filters``: ``maximum_filter``, ``minimum_filter``, ``gaussian_filter``, ``gaussian_laplace``.
- ``_peaks``: ``local_maxima``, ``window_maxima``.
- ``_products``: ``matmul``.
- ``_neighbours``: ``nearest_neighbours`` and ``mutual_nearest_neighbours`` (two of its dispatches).
- ``_registration``: ``phase_correlate``.
- ``_planes``: ``translate``, ``spot_score``.
- ``_points``: ``attribute_reads``, ``count_within``.
- ``_levels``: ``percentiles``, ``rescale_fields``, and ``clip_to_percentiles`` and
  ``normalise_to_percentile`` built of them.
- ``_landmarks``: ``spaced_peaks`` (``peak_local_max``'s spacing of a field's maxima) and
  ``match_triangles`` (spaCR's triangle consensus, and its answer, ``TriangleMatch``).

The families import the folders below the faces (``operations``, ``dispatch``, ``contract``, the
kit) and each other, never a face.
"""

from __future__ import annotations

from ..contract._registration import Registration
from ..dispatch._registry import REGISTRY
from ..operations._checks import _options

# The families in the order the table lists their rows (the doctor's capabilities, the bench): the
# order they are imported in here, which is why it is not left to an import sorter.
# isort: off
from ._filters import gaussian_filter, gaussian_laplace, maximum_filter, minimum_filter
from ._peaks import local_maxima, window_maxima
from ._products import matmul
from ._neighbours import CHUNK, mutual_nearest_neighbours, nearest_neighbours
from ._registration import phase_correlate
from ._planes import spot_score, translate
from ._points import attribute_reads, count_within
from ._levels import clip_to_percentiles, normalise_to_percentile, percentiles, rescale_fields
from ._landmarks import TriangleMatch, match_triangles, spaced_peaks
# isort: on

__all__ = [
    "CHUNK", "Registration", "TriangleMatch", "accelerated_backends", "attribute_reads",
    "clip_to_percentiles", "count_within", "gaussian_filter", "gaussian_laplace", "local_maxima",
    "match_triangles", "matmul", "maximum_filter", "minimum_filter", "mutual_nearest_neighbours",
    "nearest_neighbours", "normalise_to_percentile", "percentiles", "phase_correlate",
    "rescale_fields", "spaced_peaks", "spot_score", "translate", "window_maxima",
]


def accelerated_backends(gpu: bool = True) -> tuple[str, ...]:
    """Which backends can run here, best first, ending in ``"numpy"`` (the floor that always runs).

    Honours ``SPACR_ACCEL_BACKENDS`` and an enclosing ``use(...)``. Only ``SPACR_ACCEL_DISABLE=numpy``
    removes the floor, and then it is absent here too (and a call nothing else serves says why).

    :param gpu: ``False`` refuses the accelerated ones outright (without asking them anything).
    :returns: the usable names.
    """
    return REGISTRY.backend_names(_options(gpu, None))
