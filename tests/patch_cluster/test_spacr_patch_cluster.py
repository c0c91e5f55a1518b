"""spaCR's decode on a Dask cluster (``SPACR_ACCEL_PATCH=1,dask=...``): the same database as spaCR's
own single-process decode, a worker killed mid-field included; a cluster that cannot be reached, or
that is lost mid-well, is an error naming it; tiles a worker cannot read are named with the worker;
without the switch ``distributed`` is never imported.

The plate is the whole-well benchmark's (``benchmarks/spacr_plate.py``) at a small size. Its stitch,
phenotype and objects phases run once, by spaCR alone; each decode then runs in a fresh interpreter
(``cluster_child.py``) on a copy of that database, so every side decodes the same objects.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("spacr.ops_engine")
pytest.importorskip("distributed")
pytest.importorskip("tifffile")
pytest.importorskip("pandas")
pytest.importorskip("skimage")

from _spacr_accel_hook import modes_from
from spacr_accel_core.patch import _cluster, install
from spacr_accel_core.patch._run import main as run_main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_spacr_well  # the benchmarks folder is not a package, so its path was put first above
import spacr_plate  # the benchmarks folder is not a package, so its path was put first above

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
CHILD = Path(__file__).resolve().parent / "cluster_child.py"

_PLAIN = {"check": False, "strict": False, "report": False, "keep_memory": None}


def _env(word: str | None, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "SPACR_ACCEL_PATCH"}
    if word is not None:
        env["SPACR_ACCEL_PATCH"] = word
    return {**env, **extra}


class Plate:
    """The plate, its objects' database, and a way to decode a copy of it in a fresh interpreter."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.spec = spacr_plate.write_plate(root / "plate", sites=9, size=512, cycles=4, seed=3)
        self.objects = Path(self.side("objects", ["stitch", "phenotype", "objects"], 1, None)["db"])

    def side(self, tag: str, phases: list[str], workers: int, word: str | None, *, base: Path | None = None,
             external: bool = False, kill_flag: Path | None = None, **extra: str) -> dict[str, Any]:
        destination = self.root / tag
        destination.mkdir()
        if base is not None:
            shutil.copy(base, destination / "measurements.db")
        plan = {"benchmarks": str(BENCHMARKS), "settings": self.spec.settings(destination, workers=workers),
                "wells": list(self.spec.wells), "library": list(self.spec.library), "phases": phases,
                "external": external, "kill_flag": None if kill_flag is None else str(kill_flag)}
        plan_path, out = self.root / f"{tag}.json", self.root / f"{tag}.out.json"
        plan_path.write_text(json.dumps(plan))
        done = subprocess.run([sys.executable, str(CHILD), str(plan_path), str(out)], env=_env(word, **extra),
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        answer: dict[str, Any] = json.loads(out.read_text())
        answer["stderr"] = done.stderr
        return answer


@pytest.fixture(scope="module")
def plate(tmp_path_factory: pytest.TempPathFactory) -> Plate:
    return Plate(tmp_path_factory.mktemp("spacr_cluster"))


@pytest.fixture(scope="module")
def spacrs_own(plate: Plate) -> dict[str, Any]:
    """spaCR's own decode: one process, nothing patched."""
    answer = plate.side("spacr", ["decode"], 1, None, base=plate.objects)
    assert answer["error"] is None and not answer["patched"] and not answer["distributed"]
    return answer


def _rows(db: Path | str, table: str) -> int:
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            return 0
        return int(conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0])


def test_the_well_decoded_on_a_local_cluster_is_spacrs(plate: Plate, spacrs_own: dict[str, Any]) -> None:
    cluster = plate.side("local", ["decode"], 2, "1,dask=local:2", base=plate.objects)
    assert cluster["error"] is None and cluster["patched"] and cluster["distributed"]
    assert _rows(spacrs_own["db"], "ops_barcodes") > 0 and _rows(spacrs_own["db"], "ops_reads") > 0
    assert bench_spacr_well.compare_databases(Path(cluster["db"]), Path(spacrs_own["db"])) is None
    assert bench_spacr_well._tables(Path(cluster["db"])) == bench_spacr_well._tables(Path(spacrs_own["db"]))
    fields = cluster["fields"]
    assert sum(fields.values()) == plate.spec.sites and len(fields) == 2  # every field on the cluster's two workers


def test_a_worker_killed_mid_field_leaves_the_database_identical(plate: Plate, spacrs_own: dict[str, Any]) -> None:
    flag = plate.root / "kill.flag"
    killed = plate.side("killed", ["decode"], 2, "1", base=plate.objects, external=True, kill_flag=flag)
    assert flag.exists()  # a worker did claim the kill, in the first field it started
    workers = killed["workers"]
    assert len(workers["before"]) == len(workers["after"]) == 2
    assert len(set(workers["before"]) - set(workers["after"])) == 1  # one worker died and its nanny started another
    assert killed["error"] is None and killed["patched"]
    assert sum(killed["fields"].values()) == plate.spec.sites  # each field once: the killed one ran again elsewhere
    assert bench_spacr_well.compare_databases(Path(killed["db"]), Path(spacrs_own["db"])) is None


def test_a_cluster_that_cannot_be_reached_is_named_and_nothing_is_written(plate: Plate) -> None:
    address = "tcp://127.0.0.1:9"
    answer = plate.side("unreachable", ["decode"], 2, f"1,dask={address}", base=plate.objects,
                        DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s")
    assert answer["error"].startswith("ClusterUnreachable: ") and address in answer["error"]
    assert "no field was sent" in answer["error"]
    assert _rows(plate.root / "unreachable" / "measurements.db", "ops_barcodes") == 0


# ---- the pool on its own: order, a lost cluster, tiles a worker cannot read ---------------------


@pytest.fixture(scope="module")
def one_worker() -> Any:
    import distributed

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster
    _cluster.use(None, {})


def _pool(address: str) -> _cluster.DaskPool:
    return _cluster.DaskPool(_cluster.parse_address(address), os.getpid, (), {}, install)


def test_answers_come_back_in_the_tasks_order(one_worker: Any) -> None:
    tasks = [{"site": site, **{f"k{i}": i for i in range(site % 5)}} for site in range(12)]
    with _pool(one_worker.scheduler_address) as pool:
        assert list(pool.map(len, tasks)) == [len(task) for task in tasks]


def test_a_tile_a_worker_cannot_read_is_named_with_the_worker(one_worker: Any, tmp_path: Path) -> None:
    missing = tmp_path / "not-shared" / "10X_c1_A1_Site-0.tif"
    task = {"site": 0, "planes": {1: [(str(missing), 0), None]}}
    worker = next(iter(one_worker.scheduler_info["workers"]))
    with _pool(one_worker.scheduler_address) as pool, pytest.raises(_cluster.FieldsNotShared) as raised:
        list(pool.map(len, [task]))
    assert str(missing) in str(raised.value) and worker in str(raised.value)


def test_a_cluster_lost_mid_well_raises_naming_it() -> None:
    import distributed

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
    address = cluster.scheduler_address
    closing = threading.Thread(target=cluster.close)
    try:
        with _pool(address) as pool:
            answers = pool.map(time.sleep, [0.2] + [2.0] * 4)
            assert next(answers) is None
            closing.start()  # the scheduler goes while the second field is running
            lost = re.escape(address) + " was lost .*nothing is written for this well"
            with pytest.raises(_cluster.ClusterLost, match=lost):
                list(answers)
    finally:
        if closing.is_alive() or not closing.ident:
            closing.join() if closing.ident else cluster.close()
        _cluster.use(None, {})


def test_a_cluster_without_the_patch_install_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="install must be the patch's install function"):
        _cluster.use("local:1", {})
    assert _cluster.address() is None


def test_a_cluster_that_cannot_be_reached_raises_before_any_field() -> None:
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), \
            pytest.raises(_cluster.ClusterUnreachable, match=r"tcp://127\.0\.0\.1:9 .*cannot be reached"):
        _pool("tcp://127.0.0.1:9")


# ---- the switch -----------------------------------------------------------------------------------


def test_without_the_switch_distributed_is_never_imported() -> None:
    script = textwrap.dedent("""
        import sys
        import spacr.ops_engine, spacr.resource_log
        from spacr_accel_core import patch
        from spacr_accel_core.patch._install import original_of
        executor = spacr.resource_log._parallel_process_executor
        print(patch.installed(), original_of(executor) is not executor, "distributed" in sys.modules)
    """)
    seen = {}
    for word in ("1", "1,dask=local:2"):
        done = subprocess.run([sys.executable, "-c", script], env=_env(word), capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        seen[word] = done.stdout.split()
    assert seen["1"] == ["True", "False", "False"]  # patched, spaCR's own pool, no distributed
    assert seen["1,dask=local:2"] == ["True", "True", "False"]  # the pool replaced; distributed waits for a decode


_ADDRESSES = st.one_of(st.integers(1, 64).map(lambda n: f"local:{n}"),
                       st.tuples(st.sampled_from(["tcp", "tls", "ucx"]), st.sampled_from(["Node7", "10.0.0.2"]),
                                 st.integers(1, 65535)).map(lambda t: f"{t[0]}://{t[1]}:{t[2]}"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["1", "check", "report", " Strict ", "keep-memory"]), max_size=3), _ADDRESSES)
def test_the_variables_dask_word(words: list[str], address: str) -> None:
    value = ",".join([*words, f" dask={address} "])
    cleaned = {word.strip().lower() for word in words}
    expected = {**{key: word in cleaned for word, key in (("check", "check"), ("strict", "strict"),
                                                          ("report", "report"))},
                "keep_memory": True if "keep-memory" in cleaned else None, "dask": address}
    assert modes_from(value) == expected  # the address keeps its case, the patch is on
    assert _cluster.parse_address(address).text == address


def test_an_empty_dask_word_is_warned_about_and_ignored() -> None:
    with pytest.warns(RuntimeWarning, match="ignoring 'dask='"):
        assert modes_from("1,dask=") == _PLAIN


@pytest.mark.parametrize(("value", "error"), [("local:0", ValueError), ("local:two", ValueError),
                                               ("tcp://", ValueError), ("my cluster", ValueError),
                                               (8786, TypeError), (None, TypeError)])
def test_bad_addresses_are_refused_by_name(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="dask"):
        _cluster.parse_address(value)


def test_install_refuses_a_bad_address_before_patching_anything() -> None:
    from spacr_accel_core import patch

    was = patch.installed()
    with pytest.raises(ValueError, match="dask"):
        patch.install(dask="local:-1")
    assert patch.installed() == was and _cluster.address() is None


def test_the_command_takes_dask_and_the_program_sees_the_word(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--dask", "nowhere", "job.py"], prog="spacr-accel run") == 2
    assert "--dask" in capsys.readouterr().err
    job = tmp_path / "job.py"
    job.write_text("import os\nfrom spacr_accel_core.patch import _cluster\n"
                   "print(os.environ['SPACR_ACCEL_PATCH'], _cluster.address().text)\n")
    done = subprocess.run([sys.executable, "-m", "spacr_accel_core.patch", "--check", "--dask=local:3", str(job)],
                          env=_env(None), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1,check,dask=local:3", "local:3"]


class _Closing:
    """A client or cluster stand-in that records its close, or fails it."""

    def __init__(self, closed: list[str], name: str, fails: bool = False) -> None:
        self._closed, self._name, self._fails = closed, name, fails

    def close(self) -> None:
        if self._fails:
            raise OSError(f"{self._name}: the scheduler is already gone")
        self._closed.append(self._name)


def test_a_connection_that_fails_to_close_never_keeps_the_others_open() -> None:
    closed: list[str] = []
    connection = _cluster._Connection()
    connection._open["tcp://gone:8786"] = (_Closing(closed, "gone client", fails=True), None)
    connection._open["local:2"] = (_Closing(closed, "local client"), _Closing(closed, "local cluster"))
    connection.close()
    assert closed == ["local client", "local cluster"] and not connection._open
