"""What the patch did: per seam, the calls served (by backend), those handed to spaCR (by reason),
and the seconds in each.

Counting is a lock and two dictionary updates per call (about a microsecond): cheap enough to be
always on, so ``report()`` answers whether or not a table was asked for at exit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["PatchReport", "SeamReport", "Tally"]


@dataclass(frozen=True)
class SeamReport:
    """One seam's calls since the patch was installed (or since :func:`reset`).

    :param seam: the patched name, e.g. ``"spacr.ops_cycles.phase_correlate"``.
    :param served: ``(backend, calls, seconds)`` for each backend that served calls, most calls first.
    :param passed: ``(reason, calls, seconds)`` for each reason a call went to spaCR's own function.
    """

    seam: str
    served: tuple[tuple[str, int, float], ...]
    passed: tuple[tuple[str, int, float], ...]

    @property
    def calls(self) -> int:
        """Every call the seam saw."""
        return sum(row[1] for row in self.served) + sum(row[1] for row in self.passed)


@dataclass(frozen=True)
class PatchReport:
    """The patch's account of one process: which spaCR it found and what each seam did.

    :param spacr_version: the installed spaCR's version (``None``: not installed).
    :param table: the seam table in force (``None``: spaCR absent or a version no table covers).
    :param seams: one :class:`SeamReport` per seam that saw a call, in the table's order.
    """

    spacr_version: str | None
    table: str | None
    seams: tuple[SeamReport, ...]

    def format(self) -> str:
        """The report as the table ``--report`` prints at exit."""
        lines = [f"spacr-accel patch: spaCR {self.spacr_version or 'not installed'}"
                 f" (seams: {self.table or 'none'})"]
        if not self.seams:
            lines.append("  no patched call was made")
        for seam in self.seams:
            lines.append(f"  {seam.seam}: {seam.calls} calls")
            lines.extend(f"    served by {backend}: {calls} in {seconds:.3f} s"
                         for backend, calls, seconds in seam.served)
            lines.extend(f"    spaCR's own ({reason}): {calls} in {seconds:.3f} s"
                         for reason, calls, seconds in seam.passed)
        return "\n".join(lines)


class Tally:
    """The counters behind :class:`PatchReport`, shared by every thread of the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._served: dict[str, dict[str, list[float]]] = {}
        self._passed: dict[str, dict[str, list[float]]] = {}

    def served(self, seam: str, backend: str, seconds: float) -> None:
        self._add(self._served, seam, backend, seconds)

    def passed(self, seam: str, reason: str, seconds: float) -> None:
        self._add(self._passed, seam, reason, seconds)

    def _add(self, table: dict[str, dict[str, list[float]]], seam: str, key: str, seconds: float) -> None:
        with self._lock:
            row = table.setdefault(seam, {}).setdefault(key, [0.0, 0.0])
            row[0] += 1
            row[1] += seconds

    def reset(self) -> None:
        with self._lock:
            self._served.clear()
            self._passed.clear()

    def seams(self, order: tuple[str, ...]) -> tuple[SeamReport, ...]:
        with self._lock:
            names = [name for name in order if name in self._served or name in self._passed]
            return tuple(SeamReport(name, _rows(self._served.get(name, {})), _rows(self._passed.get(name, {})))
                         for name in names)


def _rows(counts: dict[str, list[float]]) -> tuple[tuple[str, int, float], ...]:
    ranked = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    return tuple((key, int(calls), seconds) for key, (calls, seconds) in ranked)
