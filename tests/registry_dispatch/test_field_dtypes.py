"""Camera fields reach a plugin's maximum_filter in their own dtype only where it says it takes them."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

from spacr_accel_core import Declaration, hookimpl, ops
from spacr_accel_core.testing import assert_same_field, reference_maximum_filter

NARROW = (np.uint8, np.int8, np.uint16, np.int16)


def filtering(name: str, field_dtypes: Any = ()) -> types.ModuleType:
    """A plugin of priority 500 whose filter records the dtype and writability of every field it gets."""
    module = types.ModuleType(f"spacr_accel_test_{name}")
    module.SPACR_ACCEL_PLUGIN = Declaration(name=name, priority=500.0, field_dtypes=field_dtypes)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    seen: list[tuple[np.dtype[Any], bool]] = []
    module.seen = seen  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes

    def spacr_accel_maximum_filter(field: np.ndarray, size: int) -> np.ndarray:
        seen.append((field.dtype, field.flags.writeable))
        return reference_maximum_filter(field, size)

    module.spacr_accel_maximum_filter = hookimpl(spacr_accel_maximum_filter)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    return module


def _camera(dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    field = np.random.default_rng(3).integers(info.min, int(info.max) + 1, (9, 11)).astype(dtype)
    field[0, 0], field[-1, -1] = info.min, info.max
    return field


@pytest.mark.parametrize("dtype", NARROW)
def test_a_plugin_without_the_declaration_receives_float32(private, numpy_plugin, dtype):
    """The earlier contract (float32 only) holds for every plugin that did not opt in."""
    plugin = filtering("old")
    private.register(plugin, "old")
    private.register(numpy_plugin, "numpy")
    field = _camera(dtype)
    assert_same_field(ops.maximum_filter(field, 3), reference_maximum_filter(field, 3))
    assert plugin.seen == [(np.dtype(np.float32), False)]


def test_declared_dtypes_arrive_unconverted_and_the_others_cast(private, numpy_plugin):
    plugin = filtering("partial", ("uint8", "uint16", "int16"))
    private.register(plugin, "partial")
    private.register(numpy_plugin, "numpy")
    for dtype in (*NARROW, np.float64, np.int32, np.bool_):
        field = _camera(dtype) if np.dtype(dtype).kind in "iu" else np.eye(5, dtype=dtype)
        assert_same_field(ops.maximum_filter(field, 5), reference_maximum_filter(field, 5))
    expected = [np.uint8, np.float32, np.uint16, np.int16, np.float32, np.float32, np.float32]
    assert [dtype for dtype, _ in plugin.seen] == [np.dtype(d) for d in expected]
    assert not any(writeable for _, writeable in plugin.seen), "a plugin got a field it can write to"
    big_endian = _camera(np.uint16).astype(">u2")  # not the native uint16: cast, never misread
    assert_same_field(ops.maximum_filter(big_endian, 3), reference_maximum_filter(big_endian, 3))
    assert plugin.seen[-1][0] == np.dtype(np.float32)


def test_the_floor_takes_every_camera_dtype_without_a_wrapper(private, numpy_plugin):
    """The NumPy backend declares all four, so no cast adapter: its call is the hook inside the core's
    other adapters only (the +0.0 pass outermost: the floor does not declare its zeros positive)."""
    private.register(numpy_plugin, "numpy")
    for dtype in NARROW:
        field = _camera(dtype)
        assert_same_field(ops.maximum_filter(field, 3, backend="numpy"), reference_maximum_filter(field, 3))
    chain = _wrapped(private._state().calls["maximum_filter"]["numpy"])
    assert chain[0].__qualname__ == "_settling_zeros.<locals>.settle"
    assert chain[-1] is numpy_plugin.spacr_accel_maximum_filter
    assert not any("cast" in f.__qualname__ for f in chain), [f.__qualname__ for f in chain]


def test_a_plugin_without_the_declaration_gets_the_cast_adapter(private):
    """The control for the test above: the walk does find the cast where it is made."""
    private.register(filtering("old"), "old")
    chain = _wrapped(private._state().calls["maximum_filter"]["old"])
    assert any(f.__qualname__ == "_casting.<locals>.cast" for f in chain), [f.__qualname__ for f in chain]


def _wrapped(call: Any) -> list[Any]:
    """``call`` and every function it wraps, outermost first (the adapters keep theirs in closures)."""
    chain = [call]
    while chain[-1].__closure__:
        inner = [c.cell_contents for c in chain[-1].__closure__
                 if callable(c.cell_contents) and hasattr(c.cell_contents, "__qualname__")]
        if not inner:
            break
        chain.append(inner[0])
    return chain


@pytest.mark.parametrize("declaration, needle", [
    ("uint16", "not a tuple of dtype names"),
    (["uint16"], "not a tuple of dtype names"),
    (("uint16", "float64"), "names 'float64'"),
    (("uint16", 16), "names 16"),
    (("no-such-dtype",), "names 'no-such-dtype'"),
])
def test_a_malformed_declaration_makes_that_plugin_faulty_only(private, numpy_plugin, declaration, needle):
    private.register(filtering("bad", declaration), "bad")
    private.register(numpy_plugin, "numpy")
    row = next(r for r in private.plugins() if r.name == "bad")
    assert row.status == "faulty" and "SPACR_ACCEL_PLUGIN.field_dtypes" in row.reason and needle in row.reason
    field = _camera(np.uint16)
    assert_same_field(ops.maximum_filter(field, 3), reference_maximum_filter(field, 3))


def test_float32_named_in_the_declaration_changes_nothing(private, numpy_plugin):
    plugin = filtering("f32", ("float32", "uint8"))
    private.register(plugin, "f32")
    private.register(numpy_plugin, "numpy")
    for dtype in (np.uint8, np.int8):
        field = _camera(dtype)
        assert_same_field(ops.maximum_filter(field, 3), reference_maximum_filter(field, 3))
    assert [dtype for dtype, _ in plugin.seen] == [np.dtype(np.uint8), np.dtype(np.float32)]


def test_camera_fields_are_registered_as_float32_the_same_registration(private, numpy_plugin):
    """A raw camera stack reaches phase_correlate's plugin as float32 (exact: half the bytes of a
    float64 copy), other integers as float64, and the registration is the one float64 gives."""
    module = types.ModuleType("spacr_accel_test_registering")
    module.SPACR_ACCEL_PLUGIN = Declaration(name="registering", priority=500.0)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    seen: list[np.dtype[Any]] = []

    def spacr_accel_phase_correlate(first: np.ndarray, second: np.ndarray,
                                    pairing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from spacr_accel_numpy import _registration_kernels

        seen.append(first.dtype)
        return _registration_kernels.phase_correlate(first, second, pairing)

    module.spacr_accel_phase_correlate = hookimpl(spacr_accel_phase_correlate)  # type: ignore[attr-defined]  # a stand-in module: the test gives it its attributes
    private.register(module, "registering")
    private.register(numpy_plugin, "numpy")
    base = _camera(np.uint16).astype(np.int64)[None].repeat(3, axis=0)
    moved = np.stack([np.roll(base[0], (k, -2 * k), axis=(0, 1)) for k in range(3)])
    for dtype, sent in ((np.uint8, np.float32), (np.int8, np.float32), (np.uint16, np.float32),
                        (np.int16, np.float32), (np.int32, np.float64), (np.uint64, np.float64)):
        info = np.iinfo(dtype)
        first = np.clip(base, info.min, info.max).astype(dtype)
        second = np.clip(moved, info.min, info.max).astype(dtype)
        got = ops.phase_correlate(first, second, backend="registering")
        assert seen[-1] == np.dtype(sent), dtype
        want = ops.phase_correlate(first.astype(np.float64), second.astype(np.float64), backend="numpy")
        for field in ("dy", "dx", "peak_ratio", "accepted"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
