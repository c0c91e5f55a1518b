"""The NumPy backend passes the shipped conformance suite exactly as an outside backend would."""

from spacr_accel_core.testing import BackendConformance


class TestNumpyConformance(BackendConformance):
    backend = "numpy"
