"""Plain, obviously correct answers for every operation: what every fast one must equal.

Each operation's table entry names its definition here (``reference=``): the conformance suite's
small case and the bench compare the backends with it.

WHY A SEPARATE, SLOW PACKAGE. A fast exact search is a nominator plus a settling step, a grid, a
tree, a fused kernel: each is a place to be subtly wrong (a tie at the k-th place dropped, a window
crossing two fields of a stack, a distance bound rounded the wrong way). The functions here compare
every pair and every window, in bounded row blocks, with nothing cleverer than a stable sort, so a
reader can check them against the definitions below line by line, and the fast functions are tested
against them. They share no code with the backends (:mod:`spacr_accel_core.exact` included): a
reference that shared their code would share their bugs.

THE DEFINITIONS.

- Euclidean "nearer": the float64 sum, coordinate by coordinate in order, of the squared differences
  of the float32 coordinates; among equal sums the lower target index. The distance returned is that
  sum's square root rounded to float32.
- Hamming "nearer": the count of differing bits of two rows of packed bits (``uint8``), an exact
  integer, returned as float32; among equal counts the lower index.
- ``k`` nearest: the first ``k`` targets in that order, nearest first. A neighbour whose returned
  distance is greater than ``max_distance``, or that does not exist because there are fewer than
  ``k`` targets, is index ``-1`` with distance ``inf``; such entries are always the last of a row.
- A local maximum of a field: a pixel equal to the maximum of its ``size`` x ``size`` window
  (even sizes raised to the next odd, the field's edge repeated beyond its border, a window holding
  a NaN has a NaN maximum, windows never crossing from one 2-D field of a stack into another), and
  greater than ``threshold`` when one is given. A NaN is never a maximum: it equals nothing.
- The window maxima of a stack at points: for each ``(y, x)`` and each field, the maximum of the
  pixels ``[y - r, y + r] x [x - r, x + r]`` that lie inside the field (``r = size // 2`` after
  even sizes are raised to odd), NaN when one of them is NaN, ``+0.0`` for a maximum of zero.
- A phase correlation of two 2-D fields (spaCR's definition): the float64 real FFTs ``A`` and
  ``B``; ``A * conj(B)`` divided by its magnitude where that is non-zero, else 0; the zero
  frequency 0; the inverse real FFT at the field's shape. The peak is the first maximum in
  row-major order, the ratio the peak over the mean absolute surface (0 for a zero mean); each
  coordinate of the peak is folded to its representative nearest the expected shift (halfway: an
  even number of periods away). Accepted: within ``tolerance`` of the expected shift when one is
  given, else a ratio of at least ``min_peak_ratio`` with the peak not at the origin. A field
  with no variation has a zero surface (peak at the origin, ratio 0) and is never accepted.
- A mutual pair ``(i, j)``: ``j`` is the nearest of ``first[i]`` in ``second``, ``i`` the nearest of
  ``second[j]`` in ``first``, each within ``max_distance``.
- The Gaussian filters: SciPy's ``gaussian_filter`` and ``gaussian_laplace`` of the float32 field
  over its last two axes: per axis (rows first) a 1-D correlation with SciPy's kernel summed in
  float64 (the centre term, then each mirrored pair from the outermost in) and rounded to float32;
  an axis whose sigma is at most ``1e-15`` left as it is. The Laplacian is the float32 sum of the
  second derivative along the rows and the second derivative along the columns.
- The minimum and maximum filters: the extreme of every ``size`` x ``size`` window, the field
  continued beyond its border by the mode (``"nearest"`` repeats the edge pixel, ``"reflect"``
  mirrors the field with the edge pixel repeated), a window holding a NaN is NaN, a zero is ``+0.0``.
- Spaced peaks (scikit-image's ``peak_local_max`` after its maxima): the points at least
  ``min_distance`` from every edge, ranked by their float32 value, brightest first (equal values in
  the order given), each kept unless a point kept before it lies nearer than ``min_distance`` in
  both rows and columns.
- A triangle consensus (spaCR's ``align_by_triangles`` before its ``min_votes``): each Delaunay
  triangle described by its two shorter sides over its longest, each source triangle matched to the
  target triangles within ``tolerance`` by SciPy's ball query, each match's similarity fitted by
  spaCR's closed form, the votes pooled by their medians.

THE PACKAGE BY FAMILY. This module is the public face; each family's references live beside it, one
definition per operation:

- ``_filters``: the window minimum and maximum in both modes, the Gaussian and its Laplacian.
- ``_peaks``: local maxima (on the window maximum of ``_filters``) and window maxima at points.
- ``_products``: the product, in float64 rounded once.
- ``_neighbours``: the k nearest (Euclidean and Hamming), the one-way search as the operation
  answers it, and mutual pairs.
- ``_points``: read attribution and the inlier counts, by SciPy's own tree.
- ``_registration``: the phase correlation of one pair, and of a stack as the operation answers it.
- ``_planes``: the translation, pixel by pixel, and the spot score.
- ``_levels``: per-field percentiles, and the divide and clip of each field.
- ``_landmarks``: peaks spaced as ``peak_local_max`` spaces them, and spaCR's triangle consensus,
  one triangle and one match at a time.

May import: the contract and the kit (the references stand at the kit's layer, below the operation
table that names them). Never a backend, the operation table, dispatch or a face.
"""

from __future__ import annotations

from ._filters import gaussian_filter, gaussian_laplace, maximum_filter, minimum_filter
from ._landmarks import match_triangles, spaced_peaks
from ._levels import percentiles, rescale_fields
from ._neighbours import METRICS as METRICS  # public, not one of the documented functions
from ._neighbours import hamming_nearest, k_nearest, mutual_nearest, nearest_neighbours
from ._peaks import local_maxima, window_maxima
from ._planes import spot_score, translate
from ._points import attribute_reads, count_within
from ._products import matmul
from ._registration import phase_correlate, phase_correlation

__all__ = [
    "attribute_reads",
    "count_within",
    "gaussian_filter",
    "gaussian_laplace",
    "hamming_nearest",
    "k_nearest",
    "local_maxima",
    "match_triangles",
    "matmul",
    "maximum_filter",
    "minimum_filter",
    "mutual_nearest",
    "nearest_neighbours",
    "percentiles",
    "phase_correlate",
    "phase_correlation",
    "rescale_fields",
    "spaced_peaks",
    "spot_score",
    "translate",
    "window_maxima",
]
