"""When a seam may be served: by any backend, the NumPy floor included, or only by a backend above
the floor. Where the floor cannot beat what a seam replaces, the seam serves nothing while only the
floor would answer, and spaCR's own function (SciPy's) answers instead. Each seam's row in the table
(:mod:`._table`) holds its rule; its way of serving applies the rule around the registry's call.

WHY. The floor's Gaussian and Laplacian of a Gaussian give SciPy's bits by SciPy's own separable
passes, at SciPy's own speed (1480 x 1480 float32, sigma 1: 130.8 ms against SciPy's 130.6 ms,
``docs/performance.md``), and the seam adds its checks on top: served by the floor, spaCR's decode
would be slower patched than alone. So these seams are served only by a backend above the floor
(numba, a GPU); while none can serve (numba still compiling in the background after a fresh install,
or none installed) the call is handed to spaCR's original with that reason, which the patch's report
counts. The integer translation is served the same way: the floor's slice copies are the very copies
spaCR's ``_translate`` makes (measured in spaCR's decode: 1.12 s patched against 0.86 s for spaCR's
own 43 calls), so only a card serves it. And ``_clipped``: the floor's percentiles are
``np.percentile``'s own selection (1.90 s against 1.77 s for a field's 44 planes). The windowed
minimum and maximum, the window maxima and the nearest neighbours are not here: the floor beats
spaCR's own there by 4 to 25 times.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .. import BackendWarming, NoBackendError, backends_above_floor, config
from ._outcome import PassThrough

__all__ = ["AT_FLOOR", "FloorRule", "only_above"]


@dataclass(frozen=True)
class FloorRule:
    """When a seam may be served, as its row in the table says. The seam's way of serving applies
    it around the registry's call alone (:meth:`in_force`), after its own checks: a call that goes
    to spaCR for a reason of its own is counted with that reason, whoever could serve it.

    :param operation: ``None``: any backend serves, the NumPy floor included. Otherwise the
        registry's operation the seam's call dispatches, which only a backend above the floor may
        serve.
    """

    operation: str | None = None

    @contextmanager
    def in_force(self, gpu: bool = True) -> Iterator[None]:
        """Run the block under the rule: as it is, at the floor; above it, with only the backends
        above the floor in line for ``operation``, and where none serves, leave the call to spaCR
        (``refuse``) saying why.

        :param gpu: as the block's call passes it.
        :raises PassThrough: only the floor could serve it now ("numba still compiling"), or at all.
        """
        if self.operation is None:
            yield
            return
        operation = self.operation
        above = backends_above_floor(operation, gpu)
        if not above:
            raise PassThrough(f"only the NumPy floor serves {operation} here, and spaCR's own is as fast")
        try:
            with config.override(backends=above, only=True, wait=False):  # spaCR's own answers meanwhile
                yield
        except NoBackendError as missed:
            warming = [name for name, reason in missed.reasons if reason.startswith(BackendWarming.__name__)]
            if warming:
                raise PassThrough(f"{', '.join(warming)} still compiling") from None
            raise PassThrough(f"no backend above the NumPy floor serves this {operation}") from None


AT_FLOOR = FloorRule()
"""Served by any backend, the NumPy floor included: the floor beats spaCR's own there."""


def only_above(operation: str) -> FloorRule:
    """Served only by a backend above the NumPy floor, for the registry's ``operation``."""
    return FloorRule(operation)
