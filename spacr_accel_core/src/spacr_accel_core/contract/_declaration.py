"""What a plugin is: one public record, declared once, validated once at load.

WHY ONE RECORD. Where a plugin stands in line (name, priority, ``accelerated``, whether it is the
last resort) and what its calls accept (camera dtypes, stacks, the sign of its zeros, its own
settings) must be known without importing its heavy library, and must be checked in one place:
one bad field (a string priority, a NaN) would otherwise break the ranking of every call. So a
plugin module states all of it as ``SPACR_ACCEL_PLUGIN = Declaration(...)``, and the core reads
that attribute without calling anything. Whether the plugin can run here NOW is a separate,
lazy question (``spacr_accel_backend_info``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ._markers import API_VERSION

ATTRIBUTE: Final = "SPACR_ACCEL_PLUGIN"
"""The module (or object) attribute holding a plugin's :class:`Declaration`."""

NARROW_FIELDS: Final = frozenset(np.dtype(name) for name in ("uint8", "int8", "uint16", "int16"))
"""The field dtypes the core may pass to a field operation unconverted: camera dtypes, every value
exact in float32 and the cast order-preserving, so a window extreme commutes with the cast (a
plugin may filter in the narrow type, a half or a quarter of the bytes, and cast once) and the
Gaussians, which read every pixel in float64, see the same values. Every other field, and every
field for a plugin that does not name its dtype, arrives as float32."""

_F32: Final = np.dtype(np.float32)


@dataclass(frozen=True)
class Setting:
    """One setting a plugin reads, declared so that ``spacr-accel doctor`` and
    :data:`spacr_accel_core.config` can show it without the core knowing any vendor.

    :param environment: the environment variable it is read from (``"SPACR_ACCEL_TORCH_PASS_BYTES"``).
    :param default: what applies when the variable is unset, as a person would write it.
    :param help: one line: what it changes, and why anyone would.
    """

    environment: str
    default: str = ""
    help: str = ""


@dataclass(frozen=True)
class Declaration:
    """Everything a plugin states about itself, read by the core without calling the plugin.

    :param name: the plugin's name; the entry point's name wins where they differ.
    :param priority: higher is tried first; equal priorities break ties by name. The shipped
        backends: torch 300, CuPy 200, numba 120, NumPy 100.
    :param accelerated: it needs a device, so ``gpu=False`` refuses it without asking it anything.
    :param try_last: tried after every other backend whatever its priority, and never quarantined
        by one bad answer (a fault there is about one input). The NumPy floor declares it: with
        every other backend declining, it is the one that always answers.
    :param field_dtypes: camera dtypes (names from ``uint8``, ``int8``, ``uint16``, ``int16``) its
        field operations (the four filters, ``local_maxima``, ``window_maxima``) take unconverted; every other field
        arrives float32. A tuple applies to every field operation; ``{operation: (names...)}``
        says it per operation (an operation not named gets float32 only).
    :param positive_zeros: its filter never returns ``-0.0``, so the core skips the ``+0.0`` pass
        it otherwise makes over the result (5-8 ms on a 4096^2 field). ``True`` for every
        operation, or the names of the operations it holds for.
    :param stacks: it takes a stack ``(..., H, W)`` as one array; for every other plugin the core
        hands the stack over one field at a time, inside the same dispatch (no backend writes that
        loop). ``True`` for every field operation, or the names of those that take stacks
        (``frozenset({"local_maxima"})``).
    :param settings: the environment variables it reads (shown by the doctor).
    :param api_version: the plugin API it was written for; another version is ``incompatible``.
    """

    name: str
    priority: float = 0.0
    accelerated: bool = False
    try_last: bool = False
    field_dtypes: tuple[str, ...] | Mapping[str, tuple[str, ...]] = ()
    positive_zeros: bool | frozenset[str] = False
    stacks: bool | frozenset[str] = False
    settings: tuple[Setting, ...] = field(default=())
    api_version: int = API_VERSION

    def holds(self, fact: str, operation: str) -> bool:
        """Whether ``fact`` (``"stacks"`` or ``"positive_zeros"``) holds for ``operation``."""
        value = getattr(self, fact)
        return value if isinstance(value, bool) else operation in value

    def narrow_fields(self, operation: str) -> frozenset[np.dtype[Any]]:
        """The camera dtypes ``operation`` takes unconverted (``float32`` dropped: every plugin takes it)."""
        names = self.field_dtypes.get(operation, ()) if isinstance(self.field_dtypes, Mapping) else self.field_dtypes
        return frozenset(np.dtype(n) for n in names) - {_F32}


def validated(value: object, entry_name: str,
              operations: Collection[str] | None = None) -> tuple[Declaration | None, str | None]:
    """A plugin's declaration with its priority normalised to a float and its name set to the
    entry point's, or what is wrong with it (one sentence that names the field).

    :param operations: the operations there are, to check the names a per-operation field gives
        (``None``: any name).

    Checked per plugin because one bad field would otherwise break every call: a string priority
    makes the ranking sort raise, a NaN one makes the order depend on the install order, and
    ``10**400`` overflows the conversion. NumPy scalars (``np.int64(600)``) are numbers like any.
    """
    if not isinstance(value, Declaration):
        return None, f"{ATTRIBUTE} is {_short(value)}, not a spacr_accel_core.Declaration"
    fields: dict[str, Any] = vars(value)  # as given: the annotations are a plugin's promise only
    if fields["api_version"] != API_VERSION:
        return None, (f"written for plugin API {_short(fields['api_version'])}; this spacr-accel-core "
                      f"speaks {API_VERSION}")
    if not isinstance(fields["name"], str) or not fields["name"]:
        return None, f"{ATTRIBUTE}.name is {_short(fields['name'])}, not a non-empty string"
    priority, problem = _priority(fields["priority"])
    if problem is not None:
        return None, problem
    for flag in ("accelerated", "try_last"):
        if not isinstance(fields[flag], bool):
            return None, f"{ATTRIBUTE}.{flag} is {_short(fields[flag])}, not True or False"
    per_operation = {}
    for fact in ("positive_zeros", "stacks"):
        per_operation[fact], problem = _per_operation(fact, fields[fact], operations)
        if problem is not None:
            return None, problem
    problem = _all_field_dtypes(fields["field_dtypes"], operations)
    if problem is not None:
        return None, problem
    settings = fields["settings"]
    if not isinstance(settings, tuple) or not all(isinstance(s, Setting) for s in settings):
        return None, f"{ATTRIBUTE}.settings is {_short(settings)}, not a tuple of Setting records"
    return Declaration(name=entry_name, priority=priority, accelerated=fields["accelerated"],
                       try_last=fields["try_last"], field_dtypes=fields["field_dtypes"],
                       positive_zeros=per_operation["positive_zeros"], stacks=per_operation["stacks"],
                       settings=settings), None


def _per_operation(fact: str, value: object,
                   operations: Collection[str] | None) -> tuple[bool | frozenset[str], str | None]:
    """A per-operation fact as the core keeps it: ``True``/``False``, or the frozenset of names."""
    if isinstance(value, bool):
        return value, None
    if not isinstance(value, (tuple, list, set, frozenset)) or not all(isinstance(n, str) for n in value):
        return False, (f"{ATTRIBUTE}.{fact} is {_short(value)}, not True, False or a set of "
                       "operation names")
    unknown = sorted(set(value) - set(operations)) if operations is not None else []
    if unknown:
        return False, f"{ATTRIBUTE}.{fact} names {unknown}, not operations (known: {sorted(operations or ())})"
    return frozenset(value), None


def _all_field_dtypes(value: object, operations: Collection[str] | None) -> str | None:
    """What is wrong with ``field_dtypes`` (a tuple, or ``{operation: tuple}``), or ``None``."""
    if not isinstance(value, Mapping):
        return _field_dtypes(value)
    unknown = sorted(set(value) - set(operations)) if operations is not None else []
    if unknown:
        return f"{ATTRIBUTE}.field_dtypes names {unknown}, not operations (known: {sorted(operations or ())})"
    return next((problem for names in value.values() if (problem := _field_dtypes(names)) is not None), None)


def _priority(priority: object) -> tuple[float, str | None]:
    if isinstance(priority, bool) or not isinstance(priority, numbers.Real):
        return 0.0, f"{ATTRIBUTE}.priority is {_short(priority)}, not a finite number"
    try:
        value = float(priority)
    except (OverflowError, ValueError, TypeError):
        return 0.0, f"{ATTRIBUTE}.priority is {_short(priority)}, too large for a float"
    if not math.isfinite(value):
        return 0.0, f"{ATTRIBUTE}.priority is {_short(priority)}, not a finite number"
    return value, None


def _field_dtypes(value: object) -> str | None:
    """What is wrong with ``field_dtypes``, or ``None``.

    A name outside :data:`NARROW_FIELDS` is refused rather than dropped: a plugin declaring
    ``"float64"`` expects input the core never sends, and would learn so only from wrong answers.
    """
    if not isinstance(value, tuple):
        return f"{ATTRIBUTE}.field_dtypes is {_short(value)}, not a tuple of dtype names"
    for name in value:
        try:
            dtype = np.dtype(name) if isinstance(name, str) else None
        except TypeError:
            dtype = None
        if dtype is None or (dtype not in NARROW_FIELDS and dtype != _F32):
            allowed = ", ".join(sorted(map(str, NARROW_FIELDS)))
            return f"{ATTRIBUTE}.field_dtypes names {_short(name)}; the core passes as they are only {allowed}"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
