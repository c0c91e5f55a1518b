"""A planted difference for the suite's self-test (``-p spacr_suite_nudge``, loaded for that run alone).

It moves element ``[0, 0]`` of every answer the registry's ``maximum_filter`` gives by one ulp
(towards +inf), so the patch's served ``spacr.ops_accel.maximum_filter`` is one ulp from spaCR's
own. A check run that still passes would prove that check mode cannot see a difference of one ulp;
``.ci/spacr-suite`` requires that run to fail with a ``PatchMismatch``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

__all__ = ["NUDGED", "pytest_configure"]

NUDGED = [0]
"""How many answers were moved (read by ``spacr_suite_plugin`` into the run's facts)."""


def pytest_configure(config: pytest.Config) -> None:
    """Replace the registry's ``maximum_filter`` by one whose first element is one ulp higher.

    :param config: pytest's configuration (unused; pytest passes it).
    """
    from spacr_accel_core import ops

    ops.maximum_filter = _nudged(ops.maximum_filter)


def _nudged(function: Callable[..., Any]) -> Callable[..., Any]:
    def moved(*args: Any, **kwargs: Any) -> Any:
        answer = np.array(function(*args, **kwargs), copy=True)
        if answer.size:
            answer.flat[0] = np.nextafter(answer.flat[0], np.inf)
            NUDGED[0] += 1
        return answer

    return moved
