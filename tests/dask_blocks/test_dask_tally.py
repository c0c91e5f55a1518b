"""The Dask layer's blocks and who served them, on the threaded scheduler: the local scheduler's
progress bar follows a compute, the tally counts the calls made in this process, and a forked child
starts with an empty tally (``test_dask_cluster.py`` gathers it from process workers)."""

from __future__ import annotations

import dask.array as da

from spacr_accel_core import dask as sad


def test_the_local_scheduler_progress_bar_reports_the_compute(capsys):
    from dask.diagnostics import ProgressBar

    with ProgressBar(dt=0.01):
        sad.maximum_filter(da.ones((64, 64), chunks=16), 5).compute(scheduler="threads")
    assert "100%" in capsys.readouterr().out


def test_the_tally_counts_calls_in_this_process():
    with sad.tally() as counted:
        sad.maximum_filter(da.ones((4, 30, 30), chunks=(1, 15, 30)), 3).compute(scheduler="threads")
    report = counted.report
    assert sum(report.by_backend().values()) == 4 * 2  # one call per 2-D field of each block
    assert report.workers() == ("this process",)
    assert "maximum_filter" in str(report)


def test_a_forked_child_starts_with_an_empty_tally():
    import multiprocessing

    sad.maximum_filter(da.ones((8, 8), chunks=4), 3).compute(scheduler="sync")
    assert sad.blocks_served().served  # the parent has counts
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply(sad.blocks_served)
    assert child.served == ()
