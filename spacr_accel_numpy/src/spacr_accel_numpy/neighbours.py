"""The floor's exact k-nearest machinery, public for other backends to build on.

A compiled backend (numba's grid) nominates and settles most sources itself, but a few need what
only a tree does well (sources far outside the targets' box, a crowded handful of targets), and
every backend must give the answer in the same float32 form with the same ``-1``/``inf`` rules.
These are the floor's own functions for that, so a backend that uses them answers bit for bit as
the floor does, through a declared dependency on ``spacr-accel-numpy`` rather than its private
modules.

- :func:`exact_search`: the exact first ``k`` within a bound (KD-tree nominates, exact distances
  decide, ties gathered at the k-th place).
- :func:`search_distinct`: run a search once per distinct point, answers spread to the copies.
- :func:`padded_bound`: the float64 radius that holds every target whose float32 distance can be
  within ``max_distance``.
- :func:`finish`: indices and exact squared distances to the contract's ``(N, k)`` int64/float32.
- :func:`first_k`: per row, the ``k`` smallest values' columns in (value, column) order.
"""

from __future__ import annotations

from ._knearest import exact_search, finish, first_k, padded_bound, search_distinct

__all__ = ["exact_search", "finish", "first_k", "padded_bound", "search_distinct"]
