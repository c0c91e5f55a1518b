"""Which of numba's searches takes points of which width, known without importing numba.

The neighbours hook chooses a search, and the kernel it waits for, by the points' width before any
kernel is loaded (:mod:`._neighbours`), and the searches hold to the same widths
(:mod:`._neighbours_kernels`): both read them here, since the kernels' module imports numba and the
choice must not.
"""

from __future__ import annotations

DIMENSIONS = 3
"""Most coordinates the grid takes."""

WIDE = 16
"""From this many coordinates on the GEMM beats a tree (the NumPy floor's rule too); between the
grid's 3 and this, the floor's KD-tree answers."""
