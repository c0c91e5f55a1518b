"""The numba backend passes the shipped conformance suite exactly as an outside backend would.

It implements ``maximum_filter`` and ``nearest_neighbours`` (not matmul, which the suite skips with
that reason); the inputs it declines (more than 3 coordinates, clustered targets, int8/int16 and
float fields other than float32 are cast by the core) are checked to be answered by the floor.
"""

from spacr_accel_core.testing import BackendConformance


class TestNumbaConformance(BackendConformance):
    backend = "numba"
