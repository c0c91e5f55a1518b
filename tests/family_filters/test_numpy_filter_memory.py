"""The NumPy filter's memory: each axis's window capped by its own length, and scratch reused per thread.

A thin field under a window far wider than its short axis must cost the field, not the window
(a (1, 70000) field with size 1001 padded its single row to 1001 rows: 284 MB); and a call must not
allocate its stripe buffers afresh each time (an allocator that returns them to the system, as
under a Dask Nanny's MALLOC_TRIM_THRESHOLD_, re-faults every page on every call).
"""

import threading
import tracemalloc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import ndimage

from spacr_accel_core.testing import assert_same_field, reference_maximum_filter
from spacr_accel_numpy import _filters, window_maximum


def _peak_bytes(call):
    """Peak bytes newly allocated during ``call()``, in a fresh thread (so with no scratch kept yet)."""
    peak = []

    def run():
        tracemalloc.start()
        try:
            call()
            peak.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return peak[0]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.uint16, np.int8]), thin_rows=st.booleans())
def test_thin_fields_under_wide_windows_match_the_reference(data, dtype, thin_rows):
    short = data.draw(st.integers(1, 3))
    long = data.draw(st.integers(1, 40))
    shape = (short, long) if thin_rows else (long, short)
    size = data.draw(st.integers(1, long + 2).map(lambda k: 2 * k + 1))  # up to wider than the field
    elements = st.floats(-1e6, 1e6, width=32) if dtype is np.float32 else None
    field = data.draw(hnp.arrays(dtype, shape, elements=elements))
    got = window_maximum(field, size) + np.float32(0)  # the core's sign-of-zero rule, as in ops
    assert_same_field(got, reference_maximum_filter(field.astype(np.float32), size))


def test_a_thin_field_costs_the_field_not_the_window():
    rng = np.random.default_rng(4)
    for shape, size in (((1, 70000), 1001), ((3, 50000), 4001), ((70000, 1), 1001), ((2, 9000), 17001)):
        field = rng.standard_normal(shape).astype(np.float32)
        result = {}
        peak = _peak_bytes(lambda f=field, s=size, r=result: r.setdefault("got", window_maximum(f, s)))
        # The output and four stripe buffers a few rows high: well under 16 MiB (the full-radius
        # padding of the short axis was 284 MB for the first case).
        assert peak < 16 * 2**20, (shape, size, peak)
        # The short axis lies inside every window (its radius reaches past its length), so the
        # answer is the 1-D window maximum along the long axis (scipy's, exact), maximised across.
        axis = 1 if shape[0] < shape[1] else 0
        along = ndimage.maximum_filter1d(field, size, axis=axis, mode="nearest")
        expected = np.broadcast_to(along.max(axis=1 - axis, keepdims=True), shape) + np.float32(0)
        assert_same_field(result["got"] + np.float32(0), expected.astype(np.float32))


def test_scratch_is_reused_within_a_thread():
    field = np.random.default_rng(5).standard_normal((300, 400)).astype(np.float32)
    out_bytes = field.size * 4

    def twice():
        window_maximum(field, 9)
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        window_maximum(field, 9)
        peaks.append(tracemalloc.get_traced_memory()[1] - base)

    peaks = []
    _peak_bytes(twice)
    # The four stripe buffers are ~2 MB here; the output (0.48 MB) is the call's own.
    assert peaks[0] < out_bytes + 256 * 1024, "the second call allocated its stripe buffers again"


def test_scratch_beyond_the_cap_is_not_kept():
    field = np.random.default_rng(6).standard_normal((1200, 4096)).astype(np.float32)
    kept = []

    def call():
        window_maximum(field[:300, :400], 5)  # stripe buffers of ~0.5 MB: kept
        window_maximum(field, 2001)  # needs far more than the cap
        kept.append(sum(b.nbytes for b in getattr(_filters._scratch, "buffers", ())))

    threading.Thread(target=call).start()
    while not kept:
        threading.Event().wait(0.01)
    assert 0 < kept[0] <= _filters._KEEP_BYTES


def test_threads_do_not_share_scratch():
    """Different fields filtered at once on many threads: each answer is its own field's."""
    rng = np.random.default_rng(8)
    fields = [rng.standard_normal((200 + 7 * i, 150 + 5 * i)).astype(np.float32) for i in range(8)]
    expected = [reference_maximum_filter(f, 7) for f in fields]
    got = [None] * len(fields)

    def work(i):
        for _ in range(5):
            got[i] = window_maximum(fields[i], 7)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(fields))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result, reference in zip(got, expected, strict=True):
        assert_same_field(result, reference)
