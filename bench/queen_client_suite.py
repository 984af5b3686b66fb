"""Queen's own client tests (the ``queen-mq`` 2.6.0 sdist's ``tests/``) against our server.

Run on demand (not part of CI)::

    .venv/bin/python bench/queen_client_suite.py                 # SQLite
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \\
        .venv/bin/python bench/queen_client_suite.py             # PostgreSQL
    .venv/bin/python bench/queen_client_suite.py --db both -- -k kv

What it does:

1. Gets the tests the way a user would: ``pip download queen-mq==2.6.0
   --no-binary :all: --no-deps`` into ``bench/cache/`` (git-ignored; kept,
   so later runs need no network) and unpacks the sdist's ``tests/`` there.
2. For each database, starts the real ``manage.py serve`` on a scratch
   database (``tests.conftest.run_server``: a temp SQLite file, or a
   database of its own beside ``DATABASE_URL``'s, dropped at the end) with
   ``QUEENADMIN_OPEN_API=1``. The tests assume a Queen broker without JWT:
   some of them call ``/api/v1`` with httpx and no token, and the JWT ones
   skip unless ``JWT_SECRET`` is set (it is removed from their environment).
   Then ``tests/test_auth.py`` runs again against a second server started
   as a JWT-enabled Queen broker (``JWT_ENABLED=true JWT_SECRET=...
   JWT_ALGORITHM=HS256``, no open API), with the same ``JWT_SECRET`` given
   to the tests: its JWT tests run there, and its one test for a broker
   without JWT skips. Each test counts once: passed in either run and
   failed in neither is passed (``Outcome.merge``).
3. Runs pytest on a copy of the tests plus ``bench/queen_client_conftest.py``
   as their ``conftest.py`` (the ``client`` fixture, the only one they use),
   with the sdist's own pytest options (``asyncio_mode = auto``), the
   installed client, ``QUEEN_URL`` and ``QUEEN_SERVER_URL`` set to the server.
4. Prints passed / failed / skipped, and each failing or erroring test id
   with one line of reason (the first line of its failure message); skips
   with theirs. The JUnit XML and the server's log of each run are kept in
   ``bench/results/`` (git-ignored).

Arguments after ``--`` go to pytest (``-k``, ``-x``, a test id such as
``tests/test_kv.py::test_a_batch_is_index_aligned``). The exit status is 0
when nothing failed. The server and its database are removed at the end,
also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
PACKAGE = "queen-mq"
VERSION = "2.6.0"
CACHE = ROOT / "bench" / "cache"
RESULTS = ROOT / "bench" / "results"
CONFTEST = ROOT / "bench" / "queen_client_conftest.py"
#: The sdist's own ``[tool.pytest.ini_options]`` (its pyproject.toml), as an ini file.
PYTEST_INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""
#: Variables of ours or of the tests that must not reach the test process.
DROPPED_ENV = ("JWT_SECRET", "DJANGO_SETTINGS_MODULE", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "DATABASE_URL")
#: The tests that need a JWT-enabled broker (run a second time against one).
JWT_TESTS = "tests/test_auth.py"


# --------------------------------------------------------------------------
# The tests, from the sdist


def sdist_tests() -> Path:
    """The unpacked ``tests/`` of the sdist, downloaded once into ``bench/cache``."""
    unpacked = CACHE / f"queen_mq-{VERSION}"
    tests = unpacked / "tests"
    if tests.is_dir():
        return tests
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"queen_mq-{VERSION}.tar.gz"
    if not archive.exists():
        pip = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}"]
        subprocess.run([*pip, "--no-binary", ":all:", "--no-deps", "-d", str(CACHE)], check=True)
    if not archive.exists():
        raise SystemExit(f"pip download left no {archive.name} in {CACHE}")
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    if not tests.is_dir():
        raise SystemExit(f"{archive.name} has no tests/ folder")
    return tests


def run_dir(tests: Path) -> Path:
    """A scratch folder: a copy of the tests, our conftest, the sdist's pytest options."""
    folder = Path(tempfile.mkdtemp(prefix="qa-queen-client-"))
    shutil.copytree(tests, folder / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(CONFTEST, folder / "tests" / "conftest.py")
    (folder / "pytest.ini").write_text(PYTEST_INI)
    return folder


# --------------------------------------------------------------------------
# The server


def jwt_env(secret: str) -> dict[str, str]:
    """A JWT-enabled Queen broker's variables, as ``test_auth.py`` expects one."""
    return {"JWT_ENABLED": "true", "JWT_SECRET": secret, "JWT_ALGORITHM": "HS256"}


@contextlib.contextmanager
def server_on(db: str, workers: int, extra_env: dict[str, str] | None = None) -> Iterator[Any]:
    """``run_server`` on a scratch database of ``db``: the API open (no
    tokens), or configured by ``extra_env`` (a JWT-enabled broker)."""
    from tests import conftest

    saved = os.environ.get("DATABASE_URL")
    if db == "postgres":
        os.environ["DATABASE_URL"] = saved if saved and saved.startswith("postgres") else DEFAULT_URL
        conftest.IS_POSTGRES = True
    else:
        os.environ.pop("DATABASE_URL", None)
        conftest.IS_POSTGRES = False
    try:
        env = {"QUEENADMIN_OPEN_API": "1"} if extra_env is None else extra_env
        with conftest.run_server(extra_env=env, workers=workers) as live:
            yield live
    finally:
        if saved is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = saved


# --------------------------------------------------------------------------
# One run


@dataclass
class Outcome:
    db: str
    seconds: float = 0.0
    passed: list[str] = field(default_factory=list)
    #: (test id, one line of reason)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: pytest's exit status (1: tests failed; anything above: pytest itself failed)
    status: int = 0

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed) + len(self.skipped)

    def merge(self, other: Outcome) -> None:
        """Take in a second run of some of the same tests: each test counts
        once, failed if it failed in either run, else passed if it passed in
        either, else skipped (with the first reason)."""
        failed = dict(self.failed)
        for name, reason in other.failed:
            failed.setdefault(name, reason)
        passed = [n for n in dict.fromkeys([*self.passed, *other.passed]) if n not in failed]
        skipped = dict(self.skipped)
        for name, reason in other.skipped:
            skipped.setdefault(name, reason)
        self.failed = list(failed.items())
        self.passed = passed
        self.skipped = [(n, r) for n, r in skipped.items() if n not in failed and n not in passed]
        self.seconds += other.seconds
        self.status = max(self.status, other.status)


#: Lines of pytest's assertion explanations that say nothing about the failure.
NOISE = ("Use -v to get more diff", "Omitting ", "Full diff:")


def reason_of(message: str | None, text: str | None = None) -> str:
    """One line: the message's first two meaningful lines, and where in the tests it failed."""
    lines = [line.strip() for line in (message or "").splitlines()]
    lines = [line for line in lines if line and not line.startswith(NOISE)]
    reason = " | ".join(lines[:2])[:240] or "(no message)"
    where = [line.split(": ", 1)[0] for line in (text or "").splitlines() if line.startswith("tests/")]
    return f"{reason} ({where[-1]})" if where else reason


def test_id(case: ET.Element) -> str:
    """``tests/test_kv.py::test_name`` from a JUnit ``testcase`` (classname ``tests.test_kv``)."""
    module = case.get("classname", "")
    return f"{module.replace('.', '/')}.py::{case.get('name')}"


def read_junit(path: Path, outcome: Outcome) -> None:
    for case in ET.parse(path).getroot().iter("testcase"):
        name = test_id(case)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skip = case.find("skipped")
        if problem is not None:
            outcome.failed.append((name, reason_of(problem.get("message") or problem.text, problem.text)))
        elif skip is not None:
            outcome.skipped.append((name, reason_of(skip.get("message") or skip.text)))
        else:
            outcome.passed.append(name)


def run_db(db: str, tests: Path, args: argparse.Namespace, stamp: str) -> Outcome:
    outcome = run_tests(db, tests, args, stamp, ["tests"])
    jwt_paths = jwt_selection(args.pytest_args)
    if jwt_paths is not None:
        jwt = run_tests(db, tests, args, f"{stamp}-jwt", jwt_paths, jwt_secret=secrets.token_urlsafe(48))
        if jwt.status == NO_TESTS_COLLECTED:
            jwt.status = 0
        outcome.merge(jwt)
    return outcome


#: pytest's exit status when a selection (``-k``) leaves no test.
NO_TESTS_COLLECTED = 5


def jwt_selection(pytest_args: list[str]) -> list[str] | None:
    """The paths of the JWT run: ``JWT_TESTS``, unless the arguments name
    test paths, then those of them in it; None when none is."""
    named = [a for a in pytest_args if a.startswith("tests/")]
    if not named:
        return [JWT_TESTS]
    chosen = [a for a in named if a.split("::", 1)[0] == JWT_TESTS]
    return chosen or None


def run_tests(
    db: str, tests: Path, args: argparse.Namespace, stamp: str, paths: list[str], *, jwt_secret: str | None = None
) -> Outcome:
    """One pytest run of ``paths`` against a fresh server: the open API, or a
    JWT-enabled broker when ``jwt_secret`` is given (the tests get it too)."""
    outcome = Outcome(db)
    folder = run_dir(tests)
    RESULTS.mkdir(parents=True, exist_ok=True)
    junit = RESULTS / f"queen-client-{db}-{stamp}.xml"
    server_env = None if jwt_secret is None else jwt_env(jwt_secret)
    extra = [a for a in args.pytest_args if not a.startswith("tests/")]
    try:
        with server_on(db, args.workers, server_env) as live:
            kind = "JWT-enabled " if jwt_secret else ""
            print(f"[{db}] {kind}serve at {live.url}, running {PACKAGE} {VERSION}'s {' '.join(paths)}", flush=True)
            env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
            env["QUEEN_URL"] = env["QUEEN_SERVER_URL"] = live.url
            if jwt_secret is not None:
                env["JWT_SECRET"] = jwt_secret
            named = [a for a in args.pytest_args if a.startswith("tests/")]
            command = [
                sys.executable,
                "-m",
                "pytest",
                *(paths if jwt_secret is not None or not named else named),
                "-p",
                "no:cacheprovider",
                "-p",
                "no:django",
                "--timeout",
                str(args.timeout),
                f"--junitxml={junit}",
                "-q",
                *extra,
            ]
            started = time.monotonic()
            result = subprocess.run(command, cwd=folder, env=env, stdout=None if args.verbose else subprocess.DEVNULL)
            outcome.seconds = time.monotonic() - started
            outcome.status = result.returncode
            shutil.copyfile(live.log_path, RESULTS / f"queen-client-{db}-{stamp}.serve.log")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        # The migrated template is one database's: the next run makes its own.
        _drop_template()
    if junit.exists():
        read_junit(junit, outcome)
    return outcome


def report(outcomes: list[Outcome]) -> None:
    print()
    print("| database | passed | failed | skipped | of | seconds |")
    print("|---|---|---|---|---|---|")
    for o in outcomes:
        print(f"| {o.db} | {len(o.passed)} | {len(o.failed)} | {len(o.skipped)} | {o.total} | {o.seconds:.0f} |")
    for o in outcomes:
        for name, reason in o.failed:
            print(f"FAILED  [{o.db}] {name}: {reason}")
        for name, reason in o.skipped:
            print(f"skipped [{o.db}] {name}: {reason}")
        if o.status not in (0, 1):
            print(f"PROBLEM [{o.db}] pytest exited with {o.status} (not a test failure: see above)")


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # run the finally blocks: stop serve, drop the database


def _drop_template() -> None:
    """The migrated database the servers' databases were copied from."""
    if "tests.conftest" in sys.modules:
        sys.modules["tests.conftest"].drop_live_template()


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_db = "postgres" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    parser.add_argument(
        "--db",
        choices=("sqlite", "postgres", "both"),
        default=default_db,
        help="default: postgres when DATABASE_URL names PostgreSQL, else sqlite",
    )
    parser.add_argument("--workers", type=int, default=1, help="serve --workers")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a test may take (pytest-timeout)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's own output")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args()
    tests = sdist_tests()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    dbs = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    with contextlib.ExitStack() as stack:
        stack.callback(_drop_template)
        outcomes = [run_db(db, tests, args, stamp) for db in dbs]
    report(outcomes)
    return 0 if all(o.status == 0 for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
