"""The backend author's kit: the machinery a backend builds on, public through
:mod:`spacr_accel_core.toolkit` (the one door) beside the kit's two public modules,
:mod:`spacr_accel_core.exact` and :mod:`spacr_accel_core.tiling`, which stand at this layer (with
:mod:`spacr_accel_core.reference`, the plain definitions).

- ``_precision``: the reference-counted window in which matrix products are IEEE float32.
- ``_knearest``: the exact k nearest within a distance (the floor's, shared with compiled backends).
- ``_spectra``: registration's float64 transforms, one axis at a time (SciPy's, imported on use).
- ``_translate``: a primitive's call with its library's errors in the contract's words.
- ``_points``: read attribution by SciPy's own tree, the loop over reads in arrays; the inlier
  counts' grid.
- ``_triangles``: triangle matching on stacks with the per-item calls' bits, and its probe.
- ``_peaks``: ``peak_local_max``'s border, order and spacing from the registry's local maxima.

May import: the contract, and ``exact`` and ``tiling``. Never the registry, the devices or a face.
"""
