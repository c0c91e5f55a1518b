"""The ops on a real `dask.distributed.LocalCluster` of two single-threaded process workers,
started and shut down here: agreement with the in-memory ops, a worker whose preferred backend
fails, a worker killed in the middle of a compute, the target shipped once per worker."""

from __future__ import annotations

import logging
import os
import sys

import cloudpickle
import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spacr_accel_core
from spacr_accel_core import BackendInfo, Declaration, hookimpl, ops
from spacr_accel_core import dask as sad

distributed = pytest.importorskip("distributed")

# The plugins below travel to the workers by value (this test module is not importable there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

BUSY = "busycard"


class BusyCard:
    """A backend ranked above every other whose maximum_filter fails on the worker it is put on:
    ``decline`` raises RuntimeError (a busy card: passed over per call), ``fault`` a ValueError
    (a broken plugin: quarantined on that worker after its first call)."""

    SPACR_ACCEL_PLUGIN = Declaration(name=BUSY, priority=1000.0)

    def __init__(self, how: str) -> None:
        self.how = how

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo()

    @hookimpl
    def spacr_accel_maximum_filter(self, field, size):
        if self.how == "decline":
            raise RuntimeError("card busy: another job holds it")
        raise ValueError("card busy and the plugin is broken")


class CrashesItsWorker:
    """A backend that declines three blocks (they are served by NumPy and held by this worker),
    then kills the worker process in the middle of the fourth, as a driver crash would."""

    SPACR_ACCEL_PLUGIN = Declaration(name="crasher", priority=1000.0)

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def spacr_accel_backend_info(self) -> BackendInfo:
        return BackendInfo()

    @hookimpl
    def spacr_accel_maximum_filter(self, field, size):
        self.calls += 1
        if self.calls > 3:
            os._exit(13)
        raise RuntimeError("not yet")


def install(plugin: object, name: str) -> None:
    spacr_accel_core.register(plugin, name)
    spacr_accel_core.refresh()


def uninstall(name: str) -> None:
    spacr_accel_core.unregister(name)
    spacr_accel_core.refresh()


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        yield client


def workers(client) -> list[str]:
    # Asked of the workers themselves: ``client.scheduler_info()`` is a cached identity, refreshed
    # periodically, and can be empty just after the cluster starts.
    return sorted(client.run(os.getpid))


def identical(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


def mosaic(shape, chunks, seed=0):
    """A field generated block by block on the workers (nothing of it is sent from here)."""
    return da.random.default_rng(seed).standard_normal(shape, chunks=chunks, dtype=np.float32)


def filtered_in_process(field: np.ndarray, size: int) -> np.ndarray:
    if field.ndim == 2:
        return ops.maximum_filter(field, size)
    out = np.empty(field.shape, dtype=np.float32)
    for index in np.ndindex(*field.shape[:-2]):
        out[index] = ops.maximum_filter(field[index], size)
    return out


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2), st.integers(5, 60), st.integers(5, 60), st.integers(0, 41), st.data())
def test_maximum_filter_on_process_workers_matches_ops(client, leading, height, width, size, data):
    shape = (2,) * leading + (height, width)
    chunks = (*(data.draw(st.integers(1, n)) for n in shape[:-2]),
              data.draw(st.integers(max(3, height // 4), height)), data.draw(st.integers(max(3, width // 4), width)))
    lazy = mosaic(shape, chunks, seed=height * width)
    field = lazy.compute()
    field[tuple(s // 2 for s in shape)] = np.nan
    got = sad.maximum_filter(da.from_array(field, chunks=chunks), size).compute()
    assert identical(got, filtered_in_process(field, size))


@settings(max_examples=4, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 400), st.integers(1, 3), st.integers(300, 1500))
def test_nearest_neighbours_on_process_workers_matches_ops(client, n, m, width, rows):
    rng = np.random.default_rng(n * m)
    source, target = rng.integers(0, 20, (n, width)).astype(np.float32), rng.standard_normal((m, width)) * 5
    index, distance = dask.compute(*sad.nearest_neighbours(da.from_array(source, chunks=(rows, width)), target))
    want_index, want_distance = ops.nearest_neighbours(source, target)
    assert identical(index, want_index) and identical(distance, want_distance)


def test_matmul_on_process_workers_is_chunked_like_first(client):
    first = mosaic((5000, 6), (700, 6), seed=4)
    second = np.arange(12, dtype=np.float32).reshape(6, 2)
    lazy = sad.matmul(first, second)
    assert lazy.chunks == (first.chunks[0], (2,))
    got = lazy.compute()
    assert got.dtype == np.float32 and np.allclose(got, ops.matmul(first.compute(), second), rtol=1e-5, atol=1e-4)


def test_the_tally_is_gathered_from_each_worker(client):
    with sad.tally(client) as counted:
        sad.maximum_filter(mosaic((8, 64, 64), (1, 64, 64), seed=1), 5).sum().compute()
    report = counted.report
    assert sum(report.by_backend().values()) == 8  # one call per field, nothing counted twice
    assert set(report.workers()) <= set(workers(client)) and report.workers()


@pytest.mark.parametrize("how, reason", [("decline", "RuntimeError: card busy"),
                                         ("fault", "faulty: raised ValueError")])
def test_a_worker_whose_preferred_backend_fails_falls_through_alone(client, how, reason):
    busy, other = workers(client)
    field = mosaic((256, 256), (32, 64), seed=2)  # 32 blocks: both workers take some
    want = filtered_in_process(field.compute(), 9)
    client.run(install, BusyCard(how), BUSY, workers=[busy])
    try:
        with sad.tally(client) as counted:
            got = sad.maximum_filter(field, 9).compute()
    finally:
        client.run(uninstall, BUSY, workers=[busy])
    assert identical(got, want)  # the answer does not depend on which worker served what
    on_busy, on_other = counted.report.on(busy), counted.report.on(other)
    assert on_busy.served and on_other.served, counted.report
    assert all(backend != BUSY for _, _, backend, _ in counted.report.served)
    passed = [(be, why, n) for _, _, be, why, n in on_busy.passed_over if be == BUSY]
    calls_on_busy = sum(n for *_, n in on_busy.served)
    if how == "decline":  # a busy card is asked again for every block
        assert passed and all(why.startswith(reason) for _, why, _ in passed), on_busy
        assert sum(n for *_, n in passed) == calls_on_busy
    else:  # a broken plugin is quarantined on that worker after its first fault, and says so after
        faulted = [n for _, why, n in passed if why.startswith(reason)]
        quarantined = [n for _, why, n in passed if why.startswith("quarantined: raised ValueError")]
        assert faulted == [1], on_busy
        assert sum(faulted) + sum(quarantined) == calls_on_busy
    assert not [row for row in on_other.passed_over if row[1] == BUSY]  # the other worker never saw it
    assert BUSY in str(counted.report)


def test_nan_coordinates_raise_from_the_cluster_with_the_ops_words(client):
    source = np.zeros((500, 2))
    source[321, 0] = np.nan
    with pytest.raises(ValueError) as from_ops:
        ops.nearest_neighbours(source, np.ones((5, 2)))
    with pytest.raises(ValueError) as from_cluster:
        dask.compute(*sad.nearest_neighbours(da.from_array(source, chunks=100), np.ones((5, 2))))
    assert str(from_cluster.value) == str(from_ops.value)


def test_the_target_is_shipped_once_per_worker_not_once_per_task(client):
    rng = np.random.default_rng(11)
    target = rng.standard_normal((20000, 2))  # 160 kB as float32, a key of its own
    source = mosaic((64000, 2), (2000, 2), seed=5)  # 32 tasks
    index, distance = sad.nearest_neighbours(source, target)
    graph = dict(index.__dask_graph__())
    names = {key[0] if isinstance(key, tuple) else key for key, task in graph.items()
             if len(cloudpickle.dumps(task)) >= target.size * 4}
    assert len(names) == 1  # the target, once in the graph
    with sad.tally(client) as counted:
        dask.compute(index, distance)
    computing = counted.report.workers()
    assert len(computing) == 2, counted.report  # both workers searched blocks, so both needed the target

    def received(dask_worker, wanted=tuple(names)):
        return [str(key) for log in dask_worker.transfer_incoming_log for key in log["keys"]
                if any(name in str(key) for name in wanted)]

    transfers = client.run(received)
    # One worker holds the target key from the start; the other fetches it once, for all its tasks.
    assert sorted(len(keys) for keys in transfers.values()) == [0, 1], transfers


def test_a_target_scattered_once_serves_several_computes(client):
    rng = np.random.default_rng(12)
    target = rng.standard_normal((3000, 2)).astype(np.float32)
    future = client.scatter(target, broadcast=True)  # on every worker once, for every later compute
    lazy_target = da.from_delayed(future, shape=target.shape, dtype=target.dtype)
    source = rng.standard_normal((4000, 2))
    for rows in (500, 1300):
        got = dask.compute(*sad.nearest_neighbours(da.from_array(source, chunks=(rows, 2)), lazy_target))
        want = ops.nearest_neighbours(source, target)
        assert all(identical(a, b) for a, b in zip(got, want, strict=True))


def test_distributed_progress_follows_a_compute(client, capsys):
    future = client.compute(sad.maximum_filter(mosaic((256, 256), (64, 64), seed=3), 5).sum())
    distributed.progress(future, notebook=False)
    assert np.isfinite(future.result())
    assert "100% Completed" in capsys.readouterr().out


def test_a_worker_killed_mid_compute_loses_nothing(client):
    doomed, _ = workers(client)
    pids_before = client.run(os.getpid)
    field = mosaic((512, 512), (64, 64), seed=6)  # 64 blocks
    want = filtered_in_process(field.compute(), 7)
    client.run(install, CrashesItsWorker(), "crasher", workers=[doomed])
    got = sad.maximum_filter(field, 7).compute()
    client.wait_for_workers(2, timeout=60)
    assert identical(got, want)  # its blocks were recomputed elsewhere, bit for bit
    assert doomed not in client.run(os.getpid) or client.run(os.getpid)[doomed] != pids_before[doomed]
