"""The backend author's kit: the machinery a backend builds on, public through
:mod:`spacr_accel_core.toolkit` (the one door) and, for three of its modules, through the faces
:mod:`spacr_accel_core.exact`, :mod:`spacr_accel_core.tiling` and :mod:`spacr_accel_core.separable`
(which hold no code); :mod:`spacr_accel_core.reference`, the plain definitions, stands at this layer.

- ``_exact``: the exact arithmetic every backend shares: the float64 squared distance, the tie
  rule, the float32 expansion plan, duplicate rows, exact integer products.
- ``_tiling``: how a backend sizes its passes, halves a tile that runs out of memory (a loop the
  backend drives), and shares the CPUs (one thread pool, an executor a backend maps its own
  function over; a process pool's worker taking its share).
- ``_separable``: the Gaussian passes every backend runs (SciPy's float64 weights and summing
  order, the boundary continued by the mode), and the sigma rules the input checks share.
- ``_precision``: the reference-counted window in which matrix products are IEEE float32.
- ``_knearest``: the exact k nearest within a distance (the floor's, shared with compiled backends).
- ``_spectra``: registration's float64 transforms, one axis at a time (SciPy's, imported on use),
  and how a call's pairs are shared out in runs grouped by reference.
- ``_translate``: a ``with`` block whose library errors are put in the contract's words.
- ``_points``: read attribution by SciPy's own tree, the loop over reads in arrays; the inlier
  counts' grid.
- ``_triangles``: triangle matching on stacks with the per-item calls' bits, its probe, and the
  per-item calls where the probe fails (the floor's ``match_triangles``).
- ``_peaks``: ``peak_local_max``'s border, order and spacing walk in bounded memory (the floor's
  ``spaced_peaks``), and the high order statistics of a percentile floor.
- ``_quantiles``: NumPy's percentile taken apart: the index plan and the interpolation applied to
  selected order statistics (the levels operations' and spaCR's patch's one copy).
- ``_surface``: spaCR's correlation surface in spaCR's own arithmetic, on every core (the
  reference's spectrum kept for the next pair), which spaCR's patch has spaCR's
  ``phase_correlate`` compute.
- ``_pair_trials``: spaCR's pair-search trials without its per-trial calls: the generator's draws
  replayed from its stream, each trial's ball query as the tree-ordered points of its annulus.
- ``_pair_scoring``: spaCR's pair search batched: its candidates in its order, scored a batch at a
  time by the count it is given, the first best one's transform by spaCR's expressions.

The kit gives pieces, not walks: a backend calls them and keeps its own loop (its pairs, its
tiles, its parts on the pool, its primitive inside the translated block), so an argument followed
from the operation to a backend's kernel goes down into the kit and never comes back up into the
backend by a callback (``tests/registry_layout/test_call_path.py``). The callback forms
(``run_parts``, ``tiled``, ``call_translated``, ``correlate_by_reference``) stay, written on the
pieces, for a backend that would rather hand its function over.

May import: the contract and its own folder. Never the operation table, the registry, the devices or a face.
"""
