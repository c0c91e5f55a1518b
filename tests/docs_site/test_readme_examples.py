"""The README's examples run as written: the first page a user reads must not raise."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
from typing import Any

import numpy as np

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _section(title: str, end: str) -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index(title):text.index(end)]


def test_the_using_it_examples_run_in_order_and_mean_what_their_comments_say() -> None:
    blocks = BLOCK.findall(_section("## Using it", "### Beyond one machine"))
    assert len(blocks) >= 2
    names: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for block in blocks:
            exec(compile(block, str(README), "exec"), names)  # the README's own code
    found, cycles, reads, bases = names["found"], names["cycles"], names["reads"], names["bases"]
    # each cycle rolled by (3k, -2k) lands back on the first by (-3k, 2k)
    assert found.dy.tolist() == [0, -3, -6, -9] and found.dx.tolist() == [0, 2, 4, 6]
    assert bases.shape == (len(reads), len(cycles))
    assert bases.dtype == np.float32


def test_the_dask_example_is_valid_python() -> None:
    for block in BLOCK.findall(_section("### Beyond one machine", "## Documentation")):
        compile(block, str(README), "exec")
