"""The hook specifications: the public contract third-party plugins build on.

A plugin is any module or object holding functions decorated with
:data:`spacr_accel_core.hookimpl`, advertised under the entry-point group ``spacr_accel``.
It implements whichever hooks it has something to say about.

A primitive hook is called with input the core has ALREADY validated and normalised, so a backend
never re-checks ranks, widths or dtypes; it says "not me, not now" by raising :class:`RuntimeError`
(ideally :class:`~spacr_accel_core.BackendUnavailable`, :class:`~spacr_accel_core.BackendDeclined` or
:class:`~spacr_accel_core.BackendOutOfMemory`), and anything else it raises is a fault.

DISPATCH IS THE CORE'S OWN. pluggy finds the hookimpls and matches a plugin's signature to the
specifications; the core then calls each plugin's function itself (in its own order, one at a time,
with a bound, a result check and quarantine), never ``manager.hook.<name>()``. So these
specifications carry no pluggy call options (``firstresult``, ``historic``): they would promise a
calling convention nothing uses.

THE OPERATIONS' HOOKS ARE DECLARED WITH THEIR OPERATIONS. This module holds the hooks every plugin
may answer whatever it computes (what it is, probing, warming, the host's devices). An operation's
hook, ``spacr_accel_<name>``, is specified beside the operation's public function in its family
module (``spacr_accel_core.ops._filters``, ...) and reaches pluggy through the operation table
(:func:`~spacr_accel_core.operations._operations.hook_specifications`); its arguments are passed by
position in the order written there, and the operation names them
(:meth:`~spacr_accel_core.operations._operations.Operation.positional`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from ._markers import hookspec
from ._records import Accelerator, BackendInfo, HostDevice, WarmState


@hookspec
def spacr_accel_backend_info() -> BackendInfo:  # type: ignore[empty-body]  # a specification has no body
    """Whether this plugin can run here now, and what on (what it IS, its declaration says).

    Asked lazily, the first time the plugin is next in line, once per process (again after
    :func:`spacr_accel_core.refresh`), bounded like a probe. It may import the plugin's library to
    answer; a ``RuntimeError`` here marks the plugin unusable with that reason, anything else
    marks it faulty. It must not call the ops or :func:`~spacr_accel_core.accelerator.resolve`
    (both may be waiting for this answer); ask your own library, bounded with
    :func:`~spacr_accel_core.toolkit.call_bounded` if a driver might hang.
    """


@hookspec
def spacr_accel_probe(
    torch: ModuleType | None, device_names: bool, include_cuda: bool
) -> Accelerator | None:
    """Find the accelerator this plugin knows how to drive, or return ``None``.

    Probers are walked best first (by their plugin's priority); the first usable answer wins,
    and a detected-but-unusable answer is remembered for the report if nothing better is found.
    Each call is bounded by ``SPACR_ACCEL_PROBE_TIMEOUT``; one that does not answer in time is
    abandoned and the machine resolves to the CPU. Raising :class:`RuntimeError` (e.g.
    :class:`~spacr_accel_core.BackendUnavailable`: "my library will not import") is the expected
    way to say "not here" and its message becomes the CPU's note; anything else is logged as a
    fault. A prober honours ``SPACR_DEVICE`` for the devices it drives (the core has already
    handled the values that force the CPU).

    :param torch: the torch module to ask (from :func:`~spacr_accel_core.accelerator.inspect_torch`:
        allocate nothing and change no environment, report declared dtype support), or ``None``
        when called by :func:`~spacr_accel_core.accelerator.resolve`, in which case the prober
        imports its own library, selects a device for this process and may measure it.
    :param device_names: ``False`` forbids device-property queries that may initialise a runtime.
    :param include_cuda: ``False`` skips CUDA and ROCm entirely.
    """


@hookspec
def spacr_accel_neural_engines() -> Sequence[str]:  # type: ignore[empty-body]  # a specification has no body
    """Names of inference silicon present here that no torch device reaches (found, never used)."""


@hookspec
def spacr_accel_capabilities(found: Accelerator) -> Sequence[tuple[str, bool, str]]:  # type: ignore[empty-body]  # a specification has no body
    """Extra ``(task, accelerated, detail)`` rows for the capabilities table."""


@hookspec
def spacr_accel_empty_cache(torch: ModuleType | None, found: Accelerator) -> str | None:
    """Hand the driver back what this plugin's library caches; return what was done, or ``None``.

    :param torch: the caller's own torch handle, or ``None`` (then use the process's torch if it
        is already imported; never import it just to free memory).
    :param found: the usable accelerator whose cache to release.
    :returns: the call made, e.g. ``"torch.cuda.empty_cache()"``; the first non-empty answer wins.
    """


@hookspec
def spacr_accel_warm_up(timeout: float) -> bool:  # type: ignore[empty-body]  # a specification has no body
    """Build now what this backend otherwise builds lazily (compiled kernels, a device context), and
    wait for it at most ``timeout`` seconds. Optional; never called by dispatch, only by
    :func:`spacr_accel_core.warm_up` (``spacr-accel bench`` calls it before timing anything).

    :param timeout: seconds to wait at most.
    :returns: whether everything is ready now.
    """


@hookspec
def spacr_accel_warm_state() -> WarmState:  # type: ignore[empty-body]  # a specification has no body
    """How far the lazy build :func:`spacr_accel_warm_up` waits for has got on this machine, read
    without building anything or importing anything heavy (the doctor asks it, and
    ``spacr-accel warm`` every fraction of a second while it waits). Optional.

    :returns: a :class:`~spacr_accel_core.WarmState`: pieces done of total, and whether a build
        runs now (in any process on this machine).
    """


@hookspec
def spacr_accel_host_devices() -> Sequence[HostDevice]:  # type: ignore[empty-body]  # a specification has no body
    """Compute silicon this plugin knows is present, found without initialising any device.

    The core's own answer is the operating system's inventory (PCI display and processing
    controllers, macOS and Windows display adapters, the Qualcomm Hexagon NPU); a plugin adds what
    only it can see. Called under the probe bound; a plugin that raises or overruns contributes
    nothing. Entries that are not :class:`~spacr_accel_core.HostDevice` are dropped with a warning.

    :returns: the records (an empty sequence when there is nothing to add).
    """
