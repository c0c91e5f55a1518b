"""A backend the caller wants and no other, still building what it builds lazily: waited for, bounded.

WHY. A backend that compiles in the background (numba) declines with
:class:`~spacr_accel_core.BackendWarming` until the piece a call needs is ready, and automatic
dispatch hands the call to the next backend meanwhile. A caller who forced it (``backend=`` on a
call: a benchmark, a test, a site that trusts it) has no next backend: raising the decline failed
every fresh process. The same holds under ``only`` (``use("numba", only=True)``): nothing after the
named backends may answer, so the one still building is waited for the same way, unless the caller
says ``config.override(..., wait=False)``: spaCR's patch does, asking for a backend above the floor
*now* and handing the call to spaCR's own function while numba compiles.
Waiting for the backend's whole warm-up failed too,
wherever the whole set took longer than the bound (numba's thirteen kernels on a cold cache, a
minute of one core) though the one kernel the call needed was ready in seconds.

WHAT IS DONE. The backend's warm-up hook is started in the background (so it builds now, without
its grace), and the call is asked again, every few tens of milliseconds, until it stops declining
for that reason or the probe bound (``SPACR_ACCEL_PROBE_TIMEOUT``) has passed. After the bound the
call raises :class:`~spacr_accel_core.BackendUnavailable` naming the backend, the bound and the
decline's own words (numba's name the kernel), never ``BackendWarming``. Any other decline of a forced
backend keeps the older rule (:func:`waited_for`): one wait for the whole warm-up, one more call.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import pluggy

from ..contract._errors import BackendUnavailable, BackendWarming, describe
from ._bounded import start
from ._discovery import by_name
from ._settings import ENV_PROBE_TIMEOUT, probe_timeout

logger = logging.getLogger(__name__)

FIRST_LOOK = 0.02
"""Seconds before the call is asked again the first time; each later look waits half as long again."""

LONGEST_LOOK = 0.25
"""The longest wait between two looks (a kernel loaded from a cache is ready in tens of ms)."""

_NO_BOUND = 3600.0
"""The wait where the probe bound is switched off."""


def _bound() -> float:
    timeout = probe_timeout()
    return _NO_BOUND if timeout is None else timeout


def _warm_up(manager: pluggy.PluginManager, backend: str, bound: float) -> Any:
    """Start ``backend``'s warm-up hook in a daemon thread; the event set when it returns, or ``None``
    where the backend has no warm-up hook."""
    hooks = {hook.plugin_name: hook for hook in manager.hook.spacr_accel_warm_up.get_hookimpls()}
    hook = hooks.get(backend)
    if hook is None:
        return None
    return start(functools.partial(by_name(hook.function, hook.argnames), timeout=bound), f"warm_up {backend}")


def waited_for(manager: pluggy.PluginManager, backend: str) -> bool:
    """Whether ``backend`` has a warm-up hook and became ready within the probe bound (the rule for
    a forced backend's decline that is not :class:`~spacr_accel_core.BackendWarming`)."""
    bound = _bound()
    started = _warm_up(manager, backend, bound)
    if started is None:
        return False
    logger.debug("forced backend %r declined; waiting up to %g s for it to get ready", backend, bound)
    outcome, done = started
    done.wait(bound + 5.0)
    return bool(done.is_set() and outcome.error is None and outcome.value is True)


def when_ready(manager: pluggy.PluginManager, backend: str, call: Callable[[], Any], first: BackendWarming) -> Any:
    """``call``'s answer once ``backend`` stops declining it as still building, within the probe bound.

    :param manager: the plugin manager (for the backend's warm-up hook).
    :param backend: the forced backend's name.
    :param call: the forced call, asked again as it is.
    :param first: the decline that made the call wait.
    :raises BackendUnavailable: still building after the bound; the message names what it builds.
    """
    bound = _bound()
    _warm_up(manager, backend, bound)
    logger.debug("forced backend %r is building (%s); asking again for up to %g s", backend, first, bound)
    deadline = time.monotonic() + bound
    last, look = first, FIRST_LOOK
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(look, left))
        look = min(look * 1.5, LONGEST_LOOK)
        try:
            return call()
        except BackendWarming as exc:
            last = exc
    raise BackendUnavailable(f"backend {backend!r} was still getting ready after waiting {bound:g} s "
                             f"({ENV_PROBE_TIMEOUT}): {describe(last)}") from last
