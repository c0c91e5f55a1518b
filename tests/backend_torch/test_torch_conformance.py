"""The torch backend passes the shipped conformance suite exactly as an outside backend would.

On a machine without a GPU the suite forces ``backend="torch"``, so it runs on the CPU: the same
code the GPU runs, with tensors on another device.
"""

from spacr_accel_core.testing import BackendConformance


class TestTorchConformance(BackendConformance):
    backend = "torch"
