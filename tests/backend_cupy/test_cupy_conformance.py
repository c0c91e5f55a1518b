"""The CuPy backend passes the shipped conformance suite exactly as an outside backend would.

Where no CUDA device answers (this project's development machines and CI: CuPy installs and
imports there, and every call raises ``CUDARuntimeError``), the suite skips the primitive checks
with that reason and checks the decline instead: a forced call raises a ``RuntimeError``,
automatic dispatch still answers, and ``accelerated_backends()`` leaves cupy out.
"""

from spacr_accel_core.testing import BackendConformance


class TestCupyConformance(BackendConformance):
    backend = "cupy"
