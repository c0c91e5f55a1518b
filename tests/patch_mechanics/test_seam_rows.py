"""The seam table's rows: one per seam, each naming the spaCR attribute, the function that serves it
and its floor rule; a rule above the floor reaches the function that applies it, and is obeyed."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from spacr_accel_core import patch, use
from spacr_accel_core.patch._floor import AT_FLOOR
from spacr_accel_core.patch._table import TABLES


@pytest.mark.parametrize("line", sorted(TABLES))
def test_every_row_is_one_seam_and_its_floor_rule_reaches_its_way(line: str) -> None:
    table = TABLES[line]
    assert len(set(table.names)) == len(table.names) == len(table.seams)
    assert table.names == (*(seam.name for seam in table.attributes),
                           *(seam.name for group in table.scoped for seam in group.seams))
    for seam in table.seams:
        parameters = inspect.signature(seam.serve).parameters
        if seam.floor is not AT_FLOOR:
            # the installer hands the rule over as ``floor``; the way applies it around its registry call
            assert "floor" in parameters, f"{seam.name} is ruled above the floor but its way takes no floor"
        if "floor" in parameters:
            given = parameters["floor"]
            assert given.default is AT_FLOOR and given.kind is inspect.Parameter.KEYWORD_ONLY
    above = {seam.name: seam.floor.operation for seam in table.seams if seam.floor is not AT_FLOOR}
    assert above == {"spacr.ops_cycles._translate": "translate", "spacr.ops_cycles._clipped": "percentiles",
                     "spacr.ops_engine: scipy.ndimage.gaussian_laplace": "gaussian_laplace",
                     "spacr.ops_phenotype: scipy.ndimage.gaussian_filter": "gaussian_filter"}


def test_a_row_ruled_above_the_floor_leaves_the_call_to_spacr_where_only_the_floor_serves() -> None:
    from spacr import ops_cycles

    image = np.arange(48, dtype=np.float32).reshape(6, 8)
    patch.reset()
    assert patch.install()
    try:
        with use("numpy"):
            moved = ops_cycles._translate(image, 1, 2)
        rows = {row.seam: row for row in patch.report().seams}
    finally:
        patch.uninstall()
    assert np.array_equal(moved, ops_cycles._translate(image, 1, 2))
    row = rows["spacr.ops_cycles._translate"]
    assert not row.served
    assert [reason for reason, *_ in row.passed] == ["only the NumPy floor serves translate here, and spaCR's own "
                                                      "is as fast"]
