"""The road an argument of ``ops.phase_correlate`` takes to a backend's kernel: at most five of our
modules, and never back into one it has left.

A reader who follows a field from the public function to the transform that consumes it should meet
each module once, in order: the operation, dispatch, the backend's family module, its kernels and
the kit piece they run on. A callback breaks that (the kit handed the backend's function, calling it
back): the reader goes down into the kit and comes up in the backend again, and the backend's
arithmetic is split across a call it does not own.

WHAT IS MEASURED. One call, forced onto each backend that serves ``phase_correlate`` on the CPU
(NumPy, numba once warm, torch with ``gpu=False``), is run under ``sys.setprofile`` and
``threading.setprofile`` in a fresh interpreter (so every thread of the CPU pool is started after
the profiler is installed), on three inputs: one small pair; a lone pair large enough that its
passes are split between threads; a stack of pairs that the CPU pool runs in parts on its threads.
The process is told it has four CPUs (``os.sched_getaffinity``), so that the pool is wide whatever
machine runs the test.

WHICH FRAMES COUNT: those that carry the argument's data. An array carries it when it is one of the
two fields given to ``phase_correlate``, shares memory with an array that carries it (a view, a
reshape, a tensor made from it), is returned by a call entered with such an array (its
transform, its copy), or is held in the locals of one of our frames entered with one (the arrays a
frame on the road makes are the data in motion: its spectra, its outputs). A call is on the road
when its arguments (its locals at entry, closure cells included, looking into tuples, lists and
dicts) hold data that carries it. Side calls that take none (the thread count, a readiness check,
the pool handed out, a log line) are not on the road, nor is anything they call.

THE CHAIN of a call on the road is the modules of our distributions (``spacr_accel_*``) among the
frames on the road on the stack at that call, outermost first, a run of frames in one module counted
once. A pool thread's stack begins in the standard library's ``concurrent.futures``: its chain is
joined to the chain that handed the work over, recorded where the work item is made
(``_WorkItem.__init__``, in the submitting thread), and found again from the worker's own
``_WorkItem.run`` frame. A frame of ours on the road in a thread whose work cannot be joined so is
reported, not guessed at. A return trip is a module that appears twice in one chain.

A compiled kernel (numba's) has no Python frame: handed to the kit as a callback it would never
show on a stack. So a frame on the road that HOLDS a callable defined in a module earlier in its
own chain (the kit holding the backend's function, compiled or not) is reported as the return trip
it is about to make.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

MOST_MODULES = 5
OURS = "spacr_accel_"
CASES = {"one pair": (64, 64), "a lone pair split between threads": (512, 512),
         "a stack on the pool's threads": (8, 64, 64)}
POOL_CASE = "a stack on the pool's threads"
CPUS = 4
_FUTURES = os.path.join("concurrent", "futures", "thread.py")


class Road:
    """The profiler: which calls carry the data, and the chains of our modules they make."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.torch: Any = sys.modules.get("torch")
        self.armed = False
        self.lock = threading.RLock()
        self.carried: dict[tuple[str, int, int], object] = {}  # memory that carries the data, kept alive
        self.on_road: set[FrameType] = set()
        self.handed: dict[int, tuple[object, tuple[str, ...]]] = {}  # work item id -> (item, chain)
        self.chains: dict[tuple[str, ...], set[str]] = {}  # chain -> the threads it was seen in
        self.unjoined: set[str] = set()
        self.held: set[str] = set()

    # -- what carries the data -------------------------------------------------------------------

    def _bounds(self, value: object) -> tuple[str, int, int] | None:
        np = self.np
        if isinstance(value, np.ndarray):
            if value.size == 0:
                return None
            low, high = getattr(np.lib, "array_utils", np).byte_bounds(value)
            return ("cpu", int(low), int(high))
        torch = self.torch
        if torch is not None and isinstance(value, torch.Tensor):
            if value.numel() == 0:
                return None
            storage = value.untyped_storage()
            return (str(value.device), int(storage.data_ptr()), int(storage.data_ptr() + storage.nbytes()))
        return None

    def _arrays(self, value: object, depth: int) -> Iterator[tuple[object, tuple[str, int, int]]]:
        bounds = self._bounds(value)
        if bounds is not None:
            yield value, bounds
            return
        if depth == 0:
            return
        if isinstance(value, (tuple, list, set, frozenset)):
            for item in list(value)[:64]:
                yield from self._arrays(item, depth - 1)
        elif isinstance(value, dict):
            for item in list(value.values())[:64]:
                yield from self._arrays(item, depth - 1)
        elif callable(value):
            for cell in getattr(value, "__closure__", None) or ():
                try:
                    yield from self._arrays(cell.cell_contents, depth - 1)
                except ValueError:  # an empty cell
                    continue

    def _carries(self, bounds: tuple[str, int, int]) -> bool:
        device, low, high = bounds
        return any(d == device and start < high and low < stop for d, start, stop in self.carried)

    def carry(self, value: object) -> None:
        for array, bounds in self._arrays(value, 3):
            self.carried.setdefault(bounds, array)

    def _holds_data(self, values: object) -> bool:
        return any(self._carries(bounds) for _, bounds in self._arrays(values, 3))

    # -- the chains ------------------------------------------------------------------------------

    def _chain(self, frame: FrameType | None) -> tuple[str, ...] | None:
        """Our modules on the road from the outermost frame to ``frame``; ``None`` in a pool thread
        whose work item was not seen handed over."""
        names: list[str] = []
        while frame is not None:
            code = frame.f_code
            if code.co_name == "run" and code.co_filename.endswith(_FUTURES):
                handed = self.handed.get(id(frame.f_locals.get("self")))
                if handed is None:
                    return None
                names.extend(reversed(handed[1]))
                break
            module = frame.f_globals.get("__name__", "")
            if frame in self.on_road and module.startswith(OURS):
                names.append(module)
            frame = frame.f_back
        merged: list[str] = []
        for name in reversed(names):
            if not merged or merged[-1] != name:
                merged.append(name)
        return tuple(merged)

    @staticmethod
    def _defined_in(value: object) -> str | None:
        function = getattr(value, "py_func", None) or getattr(value, "__func__", None) or value
        function = getattr(function, "func", function)  # functools.partial
        module = getattr(function, "__module__", None)
        return module if isinstance(module, str) and callable(value) else None

    def _callables(self, values: object, depth: int = 2) -> Iterator[object]:
        if callable(values) and not isinstance(values, type):
            yield values
        if depth and isinstance(values, (tuple, list)):
            for item in values[:64]:
                yield from self._callables(item, depth - 1)
        elif depth and isinstance(values, dict):
            for item in list(values.values())[:64]:
                yield from self._callables(item, depth - 1)

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        if not self.armed:
            return
        with self.lock:
            if event == "call":
                self._called(frame)
            elif event == "return" and frame in self.on_road:
                self.on_road.discard(frame)
                self.carry(arg)

    def _called(self, frame: FrameType) -> None:
        caller = frame.f_back
        if caller is not None and caller in self.on_road and caller.f_globals.get("__name__", "").startswith(OURS):
            self.carry(list(caller.f_locals.values()))
        code = frame.f_code
        if code.co_name == "__init__" and code.co_filename.endswith(_FUTURES):
            item = frame.f_locals.get("self")
            self.handed[id(item)] = (item, self._chain(frame.f_back) or ())
        arguments = list(frame.f_locals.values())
        if not self._holds_data(arguments):
            return
        self.on_road.add(frame)
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(OURS):
            return
        chain = self._chain(frame)
        if chain is None:
            self.unjoined.add(f"{module}.{code.co_name}")
            return
        self.chains.setdefault(chain, set()).add(threading.current_thread().name)
        for value in self._callables(arguments):
            defined = self._defined_in(value)
            if defined and defined != module and defined in chain[:-1]:
                self.held.add(f"{module}.{code.co_name} holds {defined}.{getattr(value, '__name__', value)}")


def _measure(backend: str) -> dict[str, Any]:
    """Run in a fresh interpreter: the chains of each case's call forced onto ``backend``."""
    os.environ.pop("OMP_NUM_THREADS", None)
    os.sched_getaffinity = lambda pid: set(range(CPUS))  # type: ignore[attr-defined]  # a wide pool here
    if backend == "torch":
        import torch  # noqa: F401  # tensors are recognised as data
    road = Road()
    threading.setprofile(road.profile)  # every thread started from here on, the pool's included
    import numpy as np

    import spacr_accel_core
    from spacr_accel_core import ops

    if backend == "numba":
        spacr_accel_core.warm_up("numba")
    found: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    for case, shape in CASES.items():
        first = rng.random(shape)
        second = np.roll(first, (3, 5), axis=(-2, -1))
        ops.phase_correlate(first, second, backend=backend, gpu=False)  # lazy imports, caches, the pool
        road.__init__()  # type: ignore[misc]  # a clean record for the measured call
        road.carry([first, second])
        road.armed = True
        sys.setprofile(road.profile)
        try:
            ops.phase_correlate(first, second, backend=backend, gpu=False)
        finally:
            sys.setprofile(None)
            road.armed = False
        served = spacr_accel_core.last_dispatch()
        found[case] = {
            "served": served.backend if served else None,
            "chains": [[list(chain), sorted(threads)] for chain, threads in road.chains.items()],
            "unjoined": sorted(road.unjoined),
            "held": sorted(road.held),
        }
    return found


def _return_trip(chain: list[str]) -> str | None:
    for index, module in enumerate(chain):
        if module in chain[:index]:
            return module
    return None


@pytest.mark.parametrize("backend", ["numpy", "numba", "torch"])
def test_phase_correlate_reaches_the_kernel_in_five_modules_without_return_trips(backend: str) -> None:
    if backend in ("numba", "torch"):
        pytest.importorskip(backend)
    ran = subprocess.run([sys.executable, __file__, backend], capture_output=True, text=True, timeout=600,
                         check=False)
    assert ran.returncode == 0, ran.stderr[-4000:]
    found = json.loads(ran.stdout.splitlines()[-1])
    problems = []
    for case, seen in found.items():
        assert seen["served"] == backend, f"{case}: served by {seen['served']}"
        chains = [(chain, threads) for chain, threads in seen["chains"]]
        assert any(m.startswith(f"spacr_accel_{backend}.") for chain, _ in chains for m in chain), (
            f"{case}: no frame of spacr_accel_{backend} was seen carrying the data")
        if case == POOL_CASE and backend in ("numpy", "numba"):
            assert any(m.startswith(f"spacr_accel_{backend}.") for chain, threads in chains if threads != ["MainThread"]
                       for m in chain), f"{case}: no pool thread was seen carrying the data: the pool went unmeasured"
        for chain, threads in chains:
            trip = _return_trip(chain)
            if len(chain) > MOST_MODULES or trip:
                why = f"back into {trip}" if trip else f"{len(chain)} modules"
                problems.append(f"{case} ({why}; {', '.join(threads)}): {' -> '.join(chain)}")
        problems += [f"{case}: a pool thread's work not joined to who handed it: {name}" for name in seen["unjoined"]]
        problems += [f"{case}: a callback into a module already left: {held}" for held in seen["held"]]
    assert not problems, "\n".join(sorted(set(problems)))


if __name__ == "__main__":
    print(json.dumps(_measure(sys.argv[1])))
