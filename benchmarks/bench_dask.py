"""Three workloads (two of maximum_filter, one of nearest_neighbours) on a LocalCluster against the same
work in-process, each a ratio measured in one run.

These machines are shared and noisy, so nothing here is an absolute time: each target is the ratio
of the cluster's time to the in-process time, the two run alternately (best of ``--repeats``).
The cluster is two single-threaded process workers with a 2 GiB memory limit each.

- mosaic: a ``side`` x ``side`` float32 mosaic (32768 at full scale: 4 GiB) generated chunk by chunk
  ON the workers, ``maximum_filter`` size 15, the peaks counted (pixels equal to their window's
  maximum) so that nothing of the mosaic is gathered; against ``ops.maximum_filter`` in-process on
  the same data in pieces of the same size (generated the same way; no halos). Target <= 1.5.
  Also printed: each worker's peak resident memory, and whether any worker was restarted.
- plate: ``fields`` fields of 1024 x 1024 float32 (1000 at full scale), one per block, generated on
  the workers (``--plate-block`` fields per block, default 1), ``maximum_filter`` size 7, peaks
  counted per field; against a plain loop over the same fields in-process. Target <= 1.3.
- nearest: ``N`` x 2 source points (1e6 at full scale) persisted on the workers, ``M`` x 2 targets
  (1e5) in memory here; ``nearest_neighbours`` on the cluster (indices and distances gathered)
  against ``ops.nearest_neighbours`` in-process. Target <= 1.5. Also printed: the bytes of each
  block task and of the target key in the graph, and what each worker received of the target.

    python benchmarks/bench_dask.py                 # full size: several minutes on 2 cores
    python benchmarks/bench_dask.py --scale 0.25    # a quarter of the pixels, fields and points
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import threading
from typing import Any

import cloudpickle
import dask
import dask.array as da
import distributed
import numpy as np
from _timing import fastest  # the benchmarks' one timer, beside this file

from spacr_accel_core import dask as sad
from spacr_accel_core import last_dispatch, ops

CHUNK = 4096  # mosaic pieces: 64 MiB of float32, 64 of them at full scale
FIELD = 1024


def block_values(seed: int, index: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """The pixels of one block, the same wherever (and however often) they are generated."""
    return np.random.default_rng((seed, *index)).standard_normal(shape, dtype=np.float32)


def generated(seed: int, shape: tuple[int, ...], chunks: tuple[int, ...]) -> da.Array:
    def make(block_info: dict[Any, Any] | None = None) -> np.ndarray:
        info = block_info[None]  # type: ignore[index]  # dask always passes it to a block_info function
        return block_values(seed, tuple(info["chunk-location"]), tuple(info["chunk-shape"]))

    return da.map_blocks(make, chunks=da.core.normalize_chunks(chunks, shape), dtype=np.float32,
                         meta=np.empty((0,) * len(shape), dtype=np.float32))


class MemoryWatch:
    """Each worker's peak resident memory, sampled every 0.2 s while a compute runs."""

    def __init__(self, client: distributed.Client) -> None:
        self.client, self.peak = client, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for worker, rss in self.client.run(_rss).items():
                    self.peak[worker] = max(self.peak.get(worker, 0), rss)
            except (OSError, distributed.TimeoutError, KeyError):  # a worker restarting mid-sample
                pass
            self._stop.wait(0.2)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _warm_numba() -> None:
    try:
        import spacr_accel_numba
    except ImportError:
        return
    spacr_accel_numba.warm()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of the full sizes: mosaic pixels, plate fields, points (default 1)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats; the best is kept (default 2)")
    parser.add_argument("--nearest-blocks", type=int, default=4,
                        help="blocks of the source points (default 4: each block builds its own search tree)")
    parser.add_argument("--plate-block", type=int, default=1,
                        help="fields per block of the plate (default 1: one field per task, as files arrive)")
    parser.add_argument("--malloc-trim", action="store_true",
                        help="keep the Nanny's MALLOC_TRIM_THRESHOLD_=65536 in the workers (dask's default); "
                             "without it (the default here) glibc's allocator adapts as in a plain process")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()

    side = max(CHUNK, round(32768 * math.sqrt(args.scale) / CHUNK) * CHUNK)
    fields = max(2, round(1000 * args.scale))
    n_source, n_target = max(1000, round(1_000_000 * args.scale)), max(100, round(100_000 * args.scale))
    out: dict[str, Any] = {"scale": args.scale, "side": side, "fields": fields, "source": n_source,
                           "target": n_target, "repeats": args.repeats, "cores": os.cpu_count()}

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    if not args.malloc_trim:
        # Setting M_TRIM_THRESHOLD turns off glibc's adaptive mmap threshold, so every buffer of a
        # few MiB is a fresh mmap and page-faulted again on every call: measured, the NumPy backend's
        # maximum_filter of a 1024^2 field, size 7, takes 7.8 ms with it against 6.2 ms without (its
        # stripe buffers are kept per thread; only the result is fresh memory on each call).
        environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    out["worker_environ"] = environ
    spawn = dask.config.set({"distributed.nanny.pre-spawn-environ": environ})
    with spawn, distributed.LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GiB", processes=True,
                                         dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        pids = client.run(os.getpid)
        # Warm both sides (registry discovery, imports, the numba kernels where installed: until
        # they are compiled the floor answers) outside the measurements.
        client.run(_warm_numba)
        _warm_numba()
        sad.maximum_filter(generated(1, (64, 64), (32, 32)), 3).sum().compute()
        ops.maximum_filter(np.ones((64, 64), np.float32), 3)

        # ---- the mosaic ----------------------------------------------------------------------
        mosaic = generated(7, (side, side), (CHUNK, CHUNK))
        peaks = (sad.maximum_filter(mosaic, 15) == mosaic).sum()
        counted: dict[str, int] = {}

        def on_cluster() -> None:
            counted["cluster"] = int(peaks.compute())

        def in_process() -> None:
            total = 0
            for i in range(side // CHUNK):
                for j in range(side // CHUNK):
                    piece = block_values(7, (i, j), (CHUNK, CHUNK))
                    total += int(np.count_nonzero(ops.maximum_filter(piece, 15) == piece))
            counted["in-process"] = total

        with MemoryWatch(client) as watch:
            cluster_s, local_s = fastest(on_cluster, in_process, repeat=args.repeats)
        out["mosaic"] = {"cluster_s": cluster_s, "in_process_s": local_s, "ratio": cluster_s / local_s,
                         "peaks_cluster": counted["cluster"], "peaks_in_process_pieces": counted["in-process"],
                         "peak_rss_mib": {w: round(r / 2**20) for w, r in watch.peak.items()},
                         "restarted": client.run(os.getpid) != pids}

        # ---- the plate -----------------------------------------------------------------------
        per = max(1, args.plate_block)
        plate = generated(11, (fields, FIELD, FIELD), (per, FIELD, FIELD))
        per_field = (sad.maximum_filter(plate, 7) == plate).sum(axis=(1, 2))

        def plate_cluster() -> None:
            counted["plate"] = int(per_field.compute().sum())

        def plate_loop() -> None:
            total = 0
            for b, first in enumerate(range(0, fields, per)):  # the same pixels as the cluster's blocks
                block = block_values(11, (b, 0, 0), (min(per, fields - first), FIELD, FIELD))
                for field in block:
                    total += int(np.count_nonzero(ops.maximum_filter(field, 7) == field))
            counted["plate-loop"] = total

        cluster_s, local_s = fastest(plate_cluster, plate_loop, repeat=args.repeats)
        assert counted["plate"] == counted["plate-loop"]  # the same fields, the same peaks
        out["plate"] = {"fields_per_block": per, "cluster_s": cluster_s, "in_process_s": local_s,
                        "ratio": cluster_s / local_s}

        # ---- nearest neighbours --------------------------------------------------------------
        rows = -(-n_source // max(1, args.nearest_blocks))
        source = generated(13, (n_source, 2), (rows, 2)) * np.float32(1000)
        source = client.persist(source)
        distributed.wait(source)
        source_here = source.compute()
        target = np.random.default_rng(17).uniform(-3000, 3000, (n_target, 2)).astype(np.float32)
        index, distance = sad.nearest_neighbours(source, target)
        graph = dict(index.__dask_graph__())
        names = {key[0] if isinstance(key, tuple) else key for key, task in graph.items()
                 if len(cloudpickle.dumps(task)) >= target.nbytes}
        task_bytes = sorted(len(cloudpickle.dumps(task)) for task in graph.values())
        big = [b for b in task_bytes if b >= target.nbytes]
        got: dict[str, tuple[np.ndarray, np.ndarray]] = {}

        def nn_cluster() -> None:
            got["cluster"] = dask.compute(index, distance)

        def nn_here() -> None:
            got["in-process"] = ops.nearest_neighbours(source_here, target)

        cluster_s, local_s = fastest(nn_cluster, nn_here, repeat=args.repeats)
        assert all(np.array_equal(a, b) for a, b in zip(got["cluster"], got["in-process"], strict=True))

        def received(dask_worker: Any) -> list[int]:
            return [nbytes for log in dask_worker.transfer_incoming_log for key, nbytes in log["keys"].items()
                    if any(name in str(key) for name in names)]

        out["nearest"] = {"cluster_s": cluster_s, "in_process_s": local_s, "ratio": cluster_s / local_s,
                          "tasks": len(task_bytes), "target_bytes": int(target.nbytes),
                          "graph_keys_holding_target": len(big),
                          "largest_other_task_bytes": max(b for b in task_bytes if b < target.nbytes),
                          "target_transfers_per_worker": {w: len(v) for w, v in client.run(received).items()}}

        out["served_on_cluster"] = sad.blocks_served(client).by_backend()
        here = {}
        for name, call in (("maximum_filter", lambda: ops.maximum_filter(np.ones((64, 64), np.float32), 15)),
                           ("nearest_neighbours", lambda: ops.nearest_neighbours(np.ones((9, 2)), np.ones((3, 2))))):
            call()
            done = last_dispatch()
            here[name] = done.backend if done is not None else "?"
        out["served_in_process"] = here

    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"workers' pre-spawn environment: {out['worker_environ']}")
    print(f"scale {args.scale}: mosaic {side}^2 float32 ({side * side * 4 / 2**30:.2f} GiB), "
          f"plate {fields} x {FIELD}^2, nearest {n_source} x {n_target} D=2; best of {args.repeats}")
    print(f"block calls served on the cluster: {out['served_on_cluster']}; in-process: {out['served_in_process']}")
    m, p, n = out["mosaic"], out["plate"], out["nearest"]
    print(f"mosaic  size 15: cluster {m['cluster_s']:.1f} s, in-process pieces {m['in_process_s']:.1f} s, "
          f"ratio {m['ratio']:.2f} (target <= 1.5); peaks {m['peaks_cluster']} "
          f"(pieces without halos: {m['peaks_in_process_pieces']}); "
          f"peak RSS MiB {m['peak_rss_mib']} of 2048; workers restarted: {m['restarted']}")
    print(f"plate   size 7, {p['fields_per_block']} field(s) per block: cluster {p['cluster_s']:.1f} s, "
          f"plain loop {p['in_process_s']:.1f} s, "
          f"ratio {p['ratio']:.2f} (target <= 1.3)")
    print(f"nearest D=2:     cluster {n['cluster_s']:.2f} s, in-process {n['in_process_s']:.2f} s, "
          f"ratio {n['ratio']:.2f} (target <= 1.5)")
    print(f"  graph: {n['tasks']} tasks; the target ({n['target_bytes']} B) in {n['graph_keys_holding_target']} "
          f"key(s); every other task <= {n['largest_other_task_bytes']} B pickled; "
          f"target transfers received per worker over {args.repeats} computes: "
          f"{n['target_transfers_per_worker']}")


if __name__ == "__main__":
    main()
