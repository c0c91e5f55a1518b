"""A fork while numba imports or compiles: the child gets numba's locks back and compiles on its own.

WHY. The warm-up thread (:mod:`._warm`) holds locks while it works: Python's lock on each module
it imports (``import numba`` alone is half a second of them), numba's global compiler lock, the
lock of its typing context's call stack, llvmlite's lock around every call into LLVM. spaCR forks
its workers; a fork copies those locks, held, into a child where the thread holding them does not
exist, and the child's first import or compile waits on them for ever.

WHAT IS DONE, AND WHY THAT WAY.

- **Before the fork** (in the parent, only while the warm-up runs): the forking thread waits, at
  most :data:`FORK_WAIT` seconds, for a moment the warm-up holds no module's import lock and is
  between two calls into LLVM, and holds llvmlite's lock and Python's global import lock through
  the fork (:func:`hold`), so that it cannot begin another import or call meanwhile. The
  state no Python code can mend, LLVM's own (its C++ tables, its mutexes), and the modules being
  imported are then whole in the child. Nor may the warm-up be inside a generator's body then:
  numba keeps generators for the life of the process (its registries' loaders), and one forked
  mid-step raises "generator already executing" in the child for ever. Most forks wait for
  nothing; at most for the rest of ``import numba`` or for one call into LLVM (the longest
  measured, a kernel's object code finalised on a cold compile: under 1 s on a loaded machine).
- **In the child** (:func:`repair`): every numba lock still held, necessarily by a thread the
  child does not have, is replaced by a new one; the compile-time call stack that thread left is
  emptied, and the dispatchers it was compiling are marked idle again (numba would otherwise take
  a call to one of them for unsupported recursion). The warm-up then starts again in the child
  (:mod:`._warm`): until its kernels are ready its calls decline and the floor answers them.
- A fork that found no such moment within the wait leaves the child's numba alone: the warm-up
  is not restarted there, and the floor answers all its calls (:mod:`._warm` says why).

Only numba's and llvmlite's own objects are touched, read through ``sys.modules`` (nothing is
imported here): a process that never imported numba pays one dictionary look-up per fork.
"""

from __future__ import annotations

import _imp
import functools
import gc
import inspect
import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

_log = logging.getLogger(__name__)

FORK_WAIT = 5.0
"""Seconds a fork waits at most for the warm-up to reach a moment a child can inherit."""

_POLL = 0.001  # seconds between two looks at the warm-up thread's imports
_HELD_SWITCH = 10.0  # seconds: the switch interval from the look to the fork (a few Python calls)


@dataclass(frozen=True)
class Hold:
    """What the forking thread holds across a fork, taken by :func:`hold`.

    :param lock: llvmlite's lock, held so that no call into LLVM is half done in the child
        (``None`` where llvmlite is not loaded, or hides its lock in a version not known here).
    :param imports: whether Python's global import lock is held too: a thread needs it to take
        any module's lock, so none can start an import between the look and the fork.
    :param safe: whether the fork found its moment: the child's numba may compile again.
    :param switch: the interpreter's thread switch interval to restore after the fork (it is
        raised meanwhile, so that the moment found is the moment forked).
    """

    lock: Any
    imports: bool
    safe: bool
    switch: float | None = None


def _llvm_lock() -> Any:
    """llvmlite's lock around every call into LLVM (``ffi.lib._lock._lock``, an RLock), if loaded."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    outer = getattr(getattr(ffi, "lib", None), "_lock", None)
    inner = getattr(outer, "_lock", None)
    return inner if callable(getattr(inner, "acquire", None)) else None


def _importing(ident: int) -> bool:
    """Whether the thread ``ident`` holds a module's import lock (it is importing)."""
    bootstrap = sys.modules.get("_frozen_importlib")
    locks = getattr(bootstrap, "_module_locks", None)
    if not isinstance(locks, dict):
        return False
    for ref in list(locks.values()):
        lock = ref() if callable(ref) else None
        if lock is not None and getattr(lock, "owner", None) == ident and getattr(lock, "count", 0):
            return True
    return False


_GENERATOR = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _in_generator(ident: int) -> bool:
    """Whether the thread ``ident`` is running a generator's body (numba keeps some generators
    for the process's life: one forked in the middle raises "generator already executing" in the
    child for ever)."""
    frame = sys._current_frames().get(ident)
    while frame is not None:
        if frame.f_code.co_flags & _GENERATOR:
            return True
        frame = frame.f_back
    return False


def hold(warm_up: int | None, wait: float | None = None) -> Hold:
    """Wait for a moment the thread ``warm_up`` may be forked away from, and hold llvmlite's lock.

    :param warm_up: the warm-up thread's ident, or ``None`` when it is not running (then only a
        call into LLVM by any thread is waited for).
    :param wait: seconds to wait at most (``None``: :data:`FORK_WAIT`): a fork must not hang either.
    :returns: what :func:`release` gives back; ``safe`` is ``False`` when the wait ran out.
    """
    deadline = time.monotonic() + (FORK_WAIT if wait is None else wait)
    while True:
        lock = _llvm_lock()
        held = lock is None or lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
        if held and warm_up is None:
            return Hold(lock=lock, imports=False, safe=True)
        if held and warm_up is not None:
            # Held until the fork (the fork takes it too, after this handler, and the child is given
            # it): the other handlers may let the warm-up run, and it must not begin an import then.
            # Nor run at all: the switch interval, raised, keeps this thread on until the fork.
            _imp.acquire_lock()
            switch = sys.getswitchinterval()
            sys.setswitchinterval(_HELD_SWITCH)
            if not _importing(warm_up) and not _in_generator(warm_up):
                return Hold(lock=lock, imports=True, safe=True, switch=switch)
            sys.setswitchinterval(switch)
            _imp.release_lock()
            if lock is not None:
                lock.release()  # the warm-up is importing: let it go on (an import may call LLVM)
        if time.monotonic() >= deadline:
            return Hold(lock=None, imports=False, safe=False)
        time.sleep(_POLL)


def release(taken: Hold | None) -> None:
    """Give back what :func:`hold` took (in the parent, and in the child, where the forking thread
    is the one thread left and still owns it)."""
    if taken is None:
        return
    if taken.switch is not None:
        sys.setswitchinterval(taken.switch)
    if taken.imports:
        _imp.release_lock()
    if taken.lock is not None:
        taken.lock.release()


def _held_by_another(lock: Any) -> bool:
    """In a forked child: whether ``lock`` is held, which can only be by a thread that is gone."""
    if lock is None or not callable(getattr(lock, "acquire", None)):
        return False
    if lock.acquire(blocking=False):  # free, or owned by this very thread (an RLock)
        lock.release()
        return False
    return True


def repair() -> list[str]:
    """In a forked child: replace each numba lock a lost thread holds, and undo what that thread
    left half done. Safe to call in any child (it changes nothing that is not held).

    :returns: what was repaired, for the log.
    """
    repaired: list[str] = []
    compiler = getattr(sys.modules.get("numba.core.compiler_lock"), "global_compiler_lock", None)
    if _held_by_another(getattr(compiler, "_lock", None)):
        compiler._lock = threading.RLock()  # type: ignore[union-attr]  # numba's _CompilerLock wraps one RLock
        repaired.append("numba's compiler lock")
    ffi = sys.modules.get("llvmlite.binding.ffi")
    if _held_by_another(_llvm_lock()):
        ffi.lib._lock._lock = threading.RLock()  # type: ignore[union-attr]  # llvmlite's _LLVMLock wraps one RLock
        repaired.append("llvmlite's lock")
    target = getattr(sys.modules.get("numba.core.registry"), "cpu_target", None)
    if target is not None:
        for name, prop in vars(type(target)).items():  # the lazily built contexts, one lock each
            if isinstance(prop, functools.cached_property):
                for attr in ("_lock", "lock"):
                    if _held_by_another(getattr(prop, attr, None)):
                        setattr(prop, attr, threading.RLock())
                        repaired.append(f"the lock of numba's {name}")
        stack = getattr(vars(target).get("_toplevel_typing_context"), "callstack", None)
        if _held_by_another(getattr(stack, "_lock", None)):
            stack._lock = threading.RLock()  # type: ignore[union-attr]  # getattr found numba's call stack: only it holds that lock
            stack._stack.clear()  # type: ignore[union-attr]  # the lost thread's frames: it held the lock
            stack._fail_cache.clear()  # type: ignore[union-attr]  # getattr found numba's call stack: only it holds that lock
            repaired.append("numba's compile-time call stack")
    if "numba's compiler lock" in repaired:
        repaired += _idle_dispatchers()
    if repaired:
        _log.debug("forked while numba was busy: replaced %s", ", ".join(repaired))
    return repaired


def _idle_dispatchers() -> list[str]:
    """Mark idle every dispatcher the lost thread was compiling (its counter stays raised, and
    numba takes a call to a compiling dispatcher for recursion). Only after the compiler lock was
    found held: then no thread left can be compiling. A walk over the heap, ~0.1 s."""
    dispatcher = sys.modules.get("numba.core.dispatcher")
    base = getattr(dispatcher, "_DispatcherBase", None)
    if base is None:
        return []
    reset = []
    for obj in gc.get_objects():
        if isinstance(obj, base):
            counter = getattr(obj, "_compiling_counter", None)
            if counter is not None and getattr(counter, "counter", None):
                counter.counter = 0
                reset.append(getattr(getattr(obj, "py_func", None), "__name__", "?"))
    return [f"the compiling mark of {', '.join(reset)}"] if reset else []
