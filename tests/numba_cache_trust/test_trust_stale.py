"""A cached kernel never answers from code that is no longer installed: every kernel of the package
is stamped with the content of every one of its files (and the interpreter's and libraries'
versions), so a change anywhere compiles it again, whichever file the change is in."""

from __future__ import annotations

import sys

import pytest

from spacr_accel_numba import _compiler, _locator

_HELPER = '''
import numba


@numba.njit(cache=True)
def helper(x):
    return x + {value}
'''

_KERNEL = '''
import numba

from . import _locator  # noqa: F401  # imported for its effect: the cache stamped before any njit
from ._trial_helper import helper


@numba.njit(cache=True)
def kernel(x):
    return helper(x) * 2
'''

_RUN = """
import sys
{before}
import spacr_accel_numba
from spacr_accel_numba import _trial_kernel
print(spacr_accel_numba.__file__)
print(_trial_kernel.kernel(1))
print(sum(_trial_kernel.kernel.stats.cache_hits.values()), sum(_trial_kernel.kernel.stats.cache_misses.values()))
"""


def _run(copied, before: str = "") -> tuple[int, int, int]:
    done = copied.python(_RUN.format(before=before))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(str(copied.package)), lines[0]  # the copy ran, not the installed package
    hits, misses = (int(word) for word in lines[2].split())
    return int(lines[1]), hits, misses


def test_a_kernel_recompiles_when_a_helper_in_another_file_changes(copied) -> None:
    (copied.package / "_trial_kernel.py").write_text(_KERNEL)
    helper = copied.package / "_trial_helper.py"
    helper.write_text(_HELPER.format(value=1))
    assert _run(copied) == (4, 0, 1)  # compiled and cached
    assert _run(copied) == (4, 1, 0)  # loaded from the cache: the same code
    helper.write_text(_HELPER.format(value=10))  # the kernel's own file is unchanged
    assert _run(copied)[:1] == (22,)
    helper.write_text(_HELPER.format(value=1))  # an in-place upgrade back to the first code
    assert _run(copied)[0] == 4
    assert _run(copied) == (4, 1, 0)


def test_another_numba_or_python_never_loads_the_cache(copied) -> None:
    (copied.package / "_trial_kernel.py").write_text(_KERNEL)
    (copied.package / "_trial_helper.py").write_text(_HELPER.format(value=1))
    assert _run(copied) == (4, 0, 1)
    other_numba = ("from spacr_accel_numba import _compiler\n"
                   "_compiler._versions = lambda: ('numba 99.0', 'llvmlite 99.0', 'numpy 99.0')")
    assert _run(copied, other_numba) == (4, 0, 1)
    # numba parses the interpreter's version at its import: changed after it
    other_python = "import numba\nsys.version = '3.99.0' + sys.version[sys.version.index(' '):]"
    assert _run(copied, other_python) == (4, 0, 1)
    assert _run(copied) == (4, 0, 1)  # the other one's save replaced the index: compiled again, cached
    assert _run(copied) == (4, 1, 0)


def test_the_fingerprint_follows_contents_versions_and_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    first = _compiler.fingerprint()
    assert _compiler.fingerprint() == first
    monkeypatch.setattr(_compiler, "_versions", lambda: ("numba 0.0",))
    assert _compiler.fingerprint() != first
    monkeypatch.undo()
    monkeypatch.setattr(sys, "version", sys.version + " other")
    assert _compiler.fingerprint() != first


def test_every_installed_kernel_is_stamped_with_the_fingerprint() -> None:
    pytest.importorskip("numba")
    from spacr_accel_numba import _filters_kernels, _levels_kernels

    for dispatcher in (_filters_kernels.filter_band, _levels_kernels.__dict__[next(
            name for name, value in vars(_levels_kernels).items() if hasattr(value, "py_func"))]):
        cache = dispatcher._cache
        assert isinstance(cache._impl.locator, _locator.PackageLocator)
        assert cache._cache_file._source_stamp == _compiler.fingerprint()
