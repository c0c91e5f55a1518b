"""The reference-counted window in which a backend's matrix products are IEEE, whatever was set.

WHY ONE WINDOW FOR MANY CALLS. A library's product precision is process-global (torch's
``allow_tf32`` and ``set_float32_matmul_precision``, CuPy's compute type): a training script in
the same process may have asked for TF32, whose 10-bit products no longer agree with the other
backends. So a backend's call saves the setting, sets IEEE, and puts it back. Calls overlap (Dask
threads, a GUI), so only the first of the overlapping calls saves and sets, and only the last puts
back (a count under a lock): overlapping calls never restore each other's state, and while a call
runs, other threads' products are IEEE too (slower, never less accurate).

WHAT A READER MAY RELY ON. :attr:`PrecisionWindow.saved` holds what the last call out will
restore from the moment before the setting changes until after it is put back, so a search that
sizes its error bound from "the setting now, and what may come back" misses no moment. The
library's own getters and setters are passed in: this module knows no vendor.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

_Saved = TypeVar("_Saved")
_Set = TypeVar("_Set")


class PrecisionWindow(Generic[_Saved, _Set]):
    """The count of calls inside the window and what the last one out restores.

    :meth:`reset` runs again in a forked child, which has only the thread that forked (a lock
    another thread held would stay held forever): the owner registers it with ``os.register_at_fork``.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every call: nobody inside, nothing saved."""
        self.lock = threading.Lock()
        self.users = 0
        """Calls inside the window now."""
        self.saved: _Saved | None = None
        """What the last call out restores; ``None`` when the window changed nothing."""
        self.applied: _Set | None = None
        """What setting IEEE left in force (the setter's answer), for the restorer to compare."""

    @contextlib.contextmanager
    def hold(self, save: Callable[[], _Saved | None], set_ieee: Callable[[_Saved], _Set],
             restore: Callable[[_Saved, _Set | None], None]) -> Iterator[None]:
        """Run the body inside the window.

        :param save: reads the setting in force; ``None`` when it is already IEEE (nothing is
            touched then). Called by the first call in only.
        :param set_ieee: sets IEEE, given what was saved; returns what it left in force. A setter
            that raises leaves the call to run as configured (nothing is restored afterwards).
        :param restore: puts the saved setting back, given what ``set_ieee`` left in force (so a
            user's own change made meanwhile can win); called by the last call out. Best effort:
            it must not raise.
        """
        with self.lock:
            if self.users == 0:
                self.saved = self.applied = None
                saved = save()
                if saved is not None:
                    self.saved = saved  # before setting: a reader counts what may come back
                    try:
                        self.applied = set_ieee(saved)
                    except Exception:  # a setter that refuses: the call runs as configured
                        self.saved = None
            self.users += 1
        try:
            yield
        finally:
            with self.lock:
                self.users -= 1
                if self.users == 0 and self.saved is not None:
                    restore(self.saved, self.applied)
                    self.applied = None
                    self.saved = None  # after restoring: a reader counts what may come back
