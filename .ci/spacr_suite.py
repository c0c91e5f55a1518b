"""spaCR's own OPS and accelerator tests, run three times: unpatched, patched, and in check mode.

The patch promises spaCR's behaviour to the bit, so spaCR's own tests are the judge: every test
that passes unpatched must pass with ``SPACR_ACCEL_PATCH=1`` and with ``SPACR_ACCEL_PATCH=check``.
A test that fails (or cannot be collected) unpatched says nothing about the patch: it is ignored,
and listed. Then a self-test shows that the check run can fail at all: one of spaCR's test files
is run in check mode with ``spacr_suite_nudge`` loaded, which moves one element of one served
answer by one ulp, and that run must fail with a ``PatchMismatch``.

THE SELECTION RULE. A file ``tests/test_*.py`` of spaCR's sdist is run when its name contains
``ops`` or ``accel``, or when it imports a ``spacr.ops_*`` module or ``spacr.accelerator``
(``import spacr.X``, ``from spacr.X import ...`` or ``from spacr import X``). That is every test of
the modules the patch touches and of the backend choices the seams consult, and of the rest of the
OPS pipeline that reaches them.

The tests run against the INSTALLED spaCR: the sdist is extracted without its ``spacr/`` folder, so
``import spacr`` can only be the installed one (the plugin's report header prints where it is).

Usage: ``.ci/spacr-suite [--sdist PATH] [--keep DIR]`` (or ``python .ci/spacr_suite.py``); without
``--sdist`` the sdist is fetched with ``pip download``. Either way its sha256 is verified. Exits 1 on
any regression, on a patched run that served no call, or when the planted ulp is not caught.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

VERSION = "1.5.1.5"
SHA256 = "4b3ec55b0140df6f34256e20927228b9deab4da0a17ea7e1abafcab36143e323"
SUPPORT = Path(__file__).resolve().parent.parent / "tests" / "patch_spacr_suite"
SELF_TEST_FILE = "tests/test_the_ops_primitives_agree_on_every_backend.py"
"""The one file of spaCR's the self-test runs: it calls the served maximum filter directly."""

_NAMED = re.compile(r"ops|accel")
_IMPORTS = re.compile(r"^\s*(?:import\s+spacr\.(?:ops_\w+|accelerator)\b"
                      r"|from\s+spacr\.(?:ops_\w+|accelerator)\b"
                      r"|from\s+spacr\s+import\s+[^#\n]*\b(?:ops_\w+|accelerator)\b)", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    """One pytest run of the selection and what each test did.

    :param name: how the run is printed.
    :param outcomes: test id -> ``passed``, ``failed``, ``error`` or ``skipped``.
    :param facts: what the plugin wrote about the patch in that process (``installed``, ``served``,
        ``passed``), or ``{}`` when it wrote nothing.
    :param returncode: pytest's exit status.
    :param seconds: the run's wall time.
    """

    name: str
    outcomes: dict[str, str]
    facts: dict[str, object]
    returncode: int
    seconds: float

    def count(self, outcome: str) -> int:
        """How many tests ended in ``outcome``.

        :param outcome: one of the outcome words.
        """
        return sum(1 for value in self.outcomes.values() if value == outcome)


def sdist(given: str | None, into: Path) -> Path:
    """spaCR's sdist, given or downloaded, after its sha256 is checked.

    :param given: a path to the sdist, or None to fetch it with pip.
    :param into: where a downloaded sdist goes.
    """
    if given:
        path = Path(given)
    else:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"spacr=={VERSION}", "-d", str(into)], check=True)
        path = next(into.glob(f"spacr-{VERSION}.tar.gz"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256:
        sys.exit(f"spacr-suite: {path} has sha256 {digest}, expected {SHA256}")
    return path


def extract(archive: Path, into: Path) -> Path:
    """The sdist's files but its ``spacr/`` package, so that the installed spaCR is the one imported.

    :param archive: the verified sdist.
    :param into: the folder to extract into.
    :returns: the sdist's top folder (holding ``tests/``).
    """
    top = f"spacr-{VERSION}"
    with tarfile.open(archive) as tar:
        members = [member for member in tar.getmembers()
                   if member.name.startswith(f"{top}/") and not member.name.startswith(f"{top}/spacr/")
                   and (member.isfile() or member.isdir())]
        tar.extractall(into, members=members, filter="data")
    root = into / top
    (root / "pytest.ini").write_text("[pytest]\n")  # this file's settings only, never a parent folder's
    return root


def selected(root: Path) -> list[str]:
    """The test files the selection rule picks (see the module's docstring), relative to ``root``.

    :param root: the extracted sdist.
    """
    chosen = []
    for path in sorted((root / "tests").glob("test_*.py")):
        if _NAMED.search(path.name) or _IMPORTS.search(path.read_text(encoding="utf-8", errors="replace")):
            chosen.append(str(path.relative_to(root)))
    return chosen


def run(name: str, root: Path, files: list[str], patch: str | None, plugins: tuple[str, ...] = ()) -> Run:
    """One pytest process over ``files`` with ``SPACR_ACCEL_PATCH`` set to ``patch`` (unset: None).

    :param name: how the run is printed.
    :param root: the extracted sdist (pytest's root folder and working folder).
    :param files: the test files.
    :param patch: the variable's value, or None for spaCR unpatched.
    :param plugins: further plugins of ``tests/patch_spacr_suite`` to load.
    """
    env = {key: value for key, value in os.environ.items() if key != "SPACR_ACCEL_PATCH"}
    if patch is not None:
        env["SPACR_ACCEL_PATCH"] = patch
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT), env.get("PYTHONPATH")]))
    slug = re.sub(r"\W+", "-", name)
    junit, facts = root / f"junit-{slug}.xml", root / f"facts-{slug}.json"
    env["SPACR_SUITE_FACTS"] = str(facts)
    command = [sys.executable, "-m", "pytest", "-c", "pytest.ini", "--rootdir", ".", "-p", "spacr_suite_plugin",
               *(part for plugin in plugins for part in ("-p", plugin)), "-p", "no:cacheprovider", "-q",
               "--continue-on-collection-errors", "-o", "junit_family=xunit1", f"--junitxml={junit}", *files]
    started = time.perf_counter()
    with open(root / f"log-{slug}.txt", "w") as log:
        done = subprocess.run(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - started
    return Run(name, outcomes(junit), json.loads(facts.read_text()) if facts.exists() else {}, done.returncode,
               seconds)


def outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome from a JUnit XML report (a collection error is its file's ``error``).

    :param junit: the report pytest wrote.
    """
    if not junit.exists():
        return {}
    found: dict[str, str] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        test = node_id(case.get("file") or "", case.get("classname") or "", case.get("name") or "")
        kinds = {child.tag for child in case}
        outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        if found.get(test, "passed") == "passed":  # a teardown error after a pass is a second case
            found[test] = outcome
    return found


def node_id(file: str, classname: str, name: str) -> str:
    """pytest's id of a test from its JUnit fields (``file::Class::name``), so it can be run again.

    :param file: the test file, relative to the root.
    :param classname: the dotted module path, then any classes.
    :param name: the test's name with its parameters.
    """
    module = file.removesuffix(".py").replace("/", ".")
    if file and classname.startswith(module + "."):
        return "::".join([file, *classname[len(module) + 1:].split("."), name])
    return f"{file or classname}::{name}"


def again(name: str, root: Path, lost: list[str], patch: str) -> list[str]:
    """The tests of ``lost`` that fail again patched while passing again unpatched, each run once
    more in a process of its own kind; the others are printed as passing on a second try.

    spaCR's suite holds a few timed tests (``elapsed < 1.0``) that a loaded machine fails now and
    then, patched or not; a regression of the patch fails every time.

    :param name: the patched run's name.
    :param root: the extracted sdist.
    :param lost: the tests that passed unpatched and not in that run.
    :param patch: the variable's value for that run.
    """
    if not lost:
        return []
    plain = run(f"{name}, unpatched again", root, lost, None)
    patched = run(f"{name}, again", root, lost, patch)
    confirmed = [test for test in lost
                 if plain.outcomes.get(test) == "passed" and patched.outcomes.get(test) != "passed"]
    for test in lost:
        if test not in confirmed:
            print(f"   passed on a second try, or failed unpatched too (not counted): {test} "
                  f"(unpatched {plain.outcomes.get(test, 'not run')}, patched {patched.outcomes.get(test, 'not run')})")
    for test in confirmed:
        print(f"   REGRESSION confirmed {test}")
    return confirmed


def show(run_: Run, baseline: Run | None, word: str = "not passing here (run again below):") -> list[str]:
    """Print a run's counts and the tests that passed unpatched but not here; return those tests.

    :param run_: the run.
    :param baseline: the unpatched run (None: this is it).
    :param word: how each such test is introduced.
    """
    counts = ", ".join(f"{run_.count(kind)} {kind}" for kind in ("passed", "failed", "error", "skipped"))
    print(f"== {run_.name}: {counts} in {run_.seconds:.0f} s (pytest exit {run_.returncode})")
    if run_.facts:
        print(f"   patch installed: {run_.facts.get('installed')}; calls served {run_.facts.get('served')}, "
              f"passed to spaCR {run_.facts.get('passed')}")
    if baseline is None:
        return []
    lost = sorted(test for test, outcome in baseline.outcomes.items()
                  if outcome == "passed" and run_.outcomes.get(test) != "passed")
    for test in lost:
        print(f"   {word} {test}: {run_.outcomes.get(test, 'not run')}")
    return lost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", help="spaCR's sdist (default: pip download it)")
    parser.add_argument("--keep", help="extract into this folder and keep the logs there")
    options = parser.parse_args()
    import importlib.metadata

    try:
        installed = importlib.metadata.version("spacr")
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"spacr-suite: spaCR is not installed for {sys.executable} (pip install --no-deps spacr=={VERSION})")
    if installed != VERSION:
        sys.exit(f"spacr-suite: spaCR {installed} is installed; this suite is spaCR {VERSION}'s")
    with tempfile.TemporaryDirectory(prefix="spacr-suite-") as scratch:
        place = Path(options.keep) if options.keep else Path(scratch)
        place.mkdir(parents=True, exist_ok=True)
        root = extract(sdist(options.sdist, place), place)
        files = selected(root)
        print(f"spacr-suite: spaCR {VERSION}'s tests, {len(files)} files (logs in {root})")
        plain = run("unpatched", root, files, None)
        show(plain, None)
        not_passing = sorted(test for test, outcome in plain.outcomes.items() if outcome in ("failed", "error"))
        print(f"   ignored, failing or not collected unpatched ({len(not_passing)}):")
        for test in not_passing:
            print(f"     {test}: {plain.outcomes[test]}")
        if not plain.count("passed"):
            print("spacr-suite: no test passed unpatched")
            return 1
        failed = False
        for name, value in (("SPACR_ACCEL_PATCH=1", "1"), ("SPACR_ACCEL_PATCH=check", "check")):
            patched = run(name, root, files, value)
            lost = show(patched, plain)
            if not patched.facts.get("installed") or not patched.facts.get("served"):
                print(f"   the patch served no call in {name}: the run proves nothing")
                failed = True
            failed = bool(again(name, root, lost, value)) or failed
        failed = self_test(root, plain) or failed
    print("spacr-suite: " + ("REGRESSIONS (above)" if failed else "every test passing unpatched passes patched"))
    return 1 if failed else 0


def self_test(root: Path, plain: Run) -> bool:
    """Check mode with one served answer moved by one ulp must fail; True when it did not.

    :param root: the extracted sdist.
    :param plain: the unpatched run, whose passing tests of the file must now include a failure.
    """
    nudged = run("self-test: check with one ulp planted", root, [SELF_TEST_FILE], "check",
                 ("spacr_suite_nudge",))
    lost = show(nudged, Run("", {test: outcome for test, outcome in plain.outcomes.items()
                                 if test.startswith(SELF_TEST_FILE)}, {}, 0, 0.0), "caught:")
    log = (root / "log-self-test-check-with-one-ulp-planted.txt").read_text(errors="replace")
    if lost and "PatchMismatch" in log and nudged.facts.get("nudged"):
        print(f"   as it must: {len(lost)} tests failed on the planted ulp "
              f"({nudged.facts.get('nudged')} answers moved)")
        return False
    print("   SELF-TEST FAILED: the check run did not catch a one-ulp difference")
    return True


if __name__ == "__main__":
    sys.exit(main())
