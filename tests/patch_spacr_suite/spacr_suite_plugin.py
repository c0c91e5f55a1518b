"""The pytest plugin ``.ci/spacr-suite`` loads into spaCR's own test suite (``-p spacr_suite_plugin``).

spaCR's sdist ships its tests without the ``conftest.py`` of its repository, which does two things
its tests rely on. This plugin does those two, and nothing else, so that a test's outcome is
spaCR's own:

* it puts the extracted ``tests/`` folder's parent on ``sys.path`` (several tests import their
  helpers as ``tests.<module>``). Only ``tests/`` is extracted, never the sdist's ``spacr/``, so
  ``import spacr`` is the installed spaCR, which is the one the patch patches;
* it forgets spaCR's cached accelerator verdict (``spacr.accelerator._CACHED``, cleared by spaCR's
  own ``_reset_device_cache``) before and after every test, as spaCR's own conftest does: a test
  that fakes the machine must not see, or leave behind, another test's verdict.

Its name is not ``conftest.py`` and it holds no test, so this project's own ``python -m pytest``
never loads it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["pytest_configure", "pytest_report_header", "pytest_sessionfinish"]


def pytest_configure(config: pytest.Config) -> None:
    """Put the extracted ``tests/`` folder's parent first on ``sys.path``.

    :param config: pytest's configuration; its ``rootdir`` is the folder holding ``tests/``.
    """
    parent = str(Path(config.rootpath).resolve())
    if parent not in sys.path:
        sys.path.insert(0, parent)
    config.pluginmanager.register(_AcceleratorVerdict(), "spacr_suite_accelerator_verdict")


def pytest_report_header(config: pytest.Config) -> str:
    """Say which spaCR the tests import, so a log shows it is the installed one.

    :param config: pytest's configuration (unused; pytest passes it).
    """
    import spacr

    return f"spaCR under test: {getattr(spacr, '__version__', '?')} at {Path(spacr.__file__).parent}"


class _AcceleratorVerdict:
    """The autouse fixture, registered as a plugin object so that it reaches every test module."""

    @pytest.fixture(autouse=True)
    def _forget_the_cached_accelerator(self) -> Iterator[None]:
        """spaCR's cached verdict cleared around each test, as spaCR's own conftest clears it."""
        _forget()
        yield
        _forget()


def _forget() -> None:
    accelerator = sys.modules.get("spacr.accelerator")
    if accelerator is None:  # never imported: nothing is cached yet
        return
    reset = getattr(accelerator, "_reset_device_cache", None)
    if callable(reset):
        reset()
    else:
        accelerator._CACHED = None  # type: ignore[attr-defined]  # spaCR's cache, which its _reset_device_cache clears


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write what the patch did in this process to ``SPACR_SUITE_FACTS`` (when it names a file).

    A patched run that served no call would pass for the wrong reason; the suite script reads this
    to tell. The planted-ulp plugin's count of moved answers is added when that plugin is loaded.

    :param session: pytest's session (unused; pytest passes it).
    """
    where = os.environ.get("SPACR_SUITE_FACTS")
    if not where:
        return
    facts: dict[str, object] = {"installed": False, "served": 0, "passed": 0}
    patch = sys.modules.get("spacr_accel_core.patch")
    if patch is not None:
        seams = patch.report().seams
        facts = {"installed": patch.installed(),
                 "served": sum(calls for seam in seams for _, calls, _ in seam.served),
                 "passed": sum(calls for seam in seams for _, calls, _ in seam.passed)}
    nudge = sys.modules.get("spacr_suite_nudge")
    if nudge is not None:
        facts["nudged"] = nudge.NUDGED[0]
    Path(where).write_text(json.dumps(facts))
