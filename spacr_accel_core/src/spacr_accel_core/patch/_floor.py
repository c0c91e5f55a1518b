"""Where the NumPy floor cannot beat what a seam replaces, the seam serves nothing while only the
floor would answer, and spaCR's own function (SciPy's) answers instead.

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

from .. import config
from ..contract._errors import BackendWarming, NoBackendError
from ..dispatch._registry import REGISTRY
from ._outcome import PassThrough

__all__ = ["above_floor"]

@contextmanager
def above_floor(operation: str, gpu: bool = True) -> Iterator[None]:
    """Run the block with only the backends above the floor in line for ``operation``; where none
    serves, leave the call to spaCR (``refuse``) saying why.

    :param operation: the registry's operation the block calls.
    :param gpu: as the block's call passes it.
    :raises PassThrough: only the floor could serve it now ("numba still compiling"), or at all.
    """
    floor = REGISTRY.floor()
    above = tuple(name for name in REGISTRY.backend_names(gpu=gpu, operation=operation) if name != floor)
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
