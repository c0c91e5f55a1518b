"""A seam's two outcomes, shared by every module that serves one: the registry's answer and the
backend it is counted under, or the reason the call is spaCR's own."""

from __future__ import annotations

from ..dispatch._registry import REGISTRY

__all__ = ["PassThrough", "served_by"]


class PassThrough(Exception):  # an outcome, read as "spaCR's own function answers this"
    """The call goes to spaCR's own function; the message is the reason the report counts."""


def served_by() -> str:
    """The backend the last registry call on this thread is counted under in the report: its name,
    with the faster backends still compiling when one was (the report counts those calls apart),
    or ``"core"`` for an answer the core gave itself."""
    served = REGISTRY.last_backend() or "core"
    waiting = REGISTRY.last_waiting()
    return f"{served} ({', '.join(waiting)} still compiling)" if waiting else served
