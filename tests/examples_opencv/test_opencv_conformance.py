"""The OpenCV example passes the shipped conformance suite, exactly as our own backends do.

It implements only ``maximum_filter``, so the matmul and nearest-neighbour checks are skipped
with that reason; the fields holding a NaN are declined per call, and the suite checks that the
next backend then answers them exactly.
"""

import importlib.metadata

import pytest

from spacr_accel_core.testing import BackendConformance

pytestmark = pytest.mark.skipif(
    "spacr-accel-opencv" not in {d.metadata["Name"] for d in importlib.metadata.distributions()},
    reason="the example is not installed: pip install -e examples/spacr-accel-opencv",
)


class TestOpencvConformance(BackendConformance):
    backend = "opencv"
