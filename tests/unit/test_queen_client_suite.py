"""bench/queen_client_suite.py's own parts that need no network and no server.

The runner itself is on demand (it downloads the sdist and starts a server);
this checks what it builds and how it reads pytest's JUnit report, on files
made here.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("queen_client_suite", ROOT / "bench" / "queen_client_suite.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up while the class is made
    sys.modules["queen_client_suite"] = module
    spec.loader.exec_module(module)
    return module


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4">
<testcase classname="tests.test_kv" name="test_ok" time="0.1" />
<testcase classname="tests.test_reads" name="test_offsets" time="0.2">
<failure message="assert (1, 1) == (0, 0)&#10;  &#10;  At index 0 diff: 1 != 0&#10;  Use -v to get more diff">
client = &lt;queen.client.Queen object&gt;
E       assert (1, 1) == (0, 0)

tests/test_reads.py:69: AssertionError</failure></testcase>
<testcase classname="tests.test_auth" name="test_jwt" time="0.0">
<skipped type="pytest.skip" message="set JWT_SECRET to run">tests/test_auth.py:150: set JWT_SECRET to run</skipped>
</testcase>
<testcase classname="tests.test_pop" name="test_setup_fails" time="0.0">
<error message="failed on setup with &quot;KeyError: 'QUEEN_URL'&quot;">KeyError</error></testcase>
</testsuite></testsuites>
"""


def test_the_junit_report_reads_as_test_ids_with_one_line_of_reason(suite: ModuleType, tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(JUNIT)
    outcome = suite.Outcome("sqlite")
    suite.read_junit(report, outcome)
    assert outcome.passed == ["tests/test_kv.py::test_ok"]
    assert outcome.failed == [
        (
            "tests/test_reads.py::test_offsets",
            "assert (1, 1) == (0, 0) | At index 0 diff: 1 != 0 (tests/test_reads.py:69)",
        ),
        ("tests/test_pop.py::test_setup_fails", "failed on setup with \"KeyError: 'QUEEN_URL'\""),
    ]
    assert outcome.skipped == [("tests/test_auth.py::test_jwt", "set JWT_SECRET to run")]
    assert outcome.total == 4


def test_a_failure_without_a_message_still_has_a_reason(suite: ModuleType) -> None:
    assert suite.reason_of(None) == "(no message)"
    assert suite.reason_of("x" * 500) == "x" * 240


def test_the_run_folder_is_the_tests_our_conftest_and_the_sdists_pytest_options(
    suite: ModuleType, tmp_path: Path
) -> None:
    tests = tmp_path / "sdist" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_one.py").write_text("def test_one(client): pass\n")
    (tests / "__pycache__").mkdir()
    folder = suite.run_dir(tests)
    try:
        assert sorted(p.name for p in (folder / "tests").iterdir()) == ["conftest.py", "test_one.py"]
        assert (folder / "tests" / "conftest.py").read_text() == (
            ROOT / "bench" / "queen_client_conftest.py"
        ).read_text()
        ini = (folder / "pytest.ini").read_text().splitlines()
        assert ini == ["[pytest]", "asyncio_mode = auto", "asyncio_default_fixture_loop_scope = function"]
    finally:
        shutil.rmtree(folder)


def test_a_second_run_counts_each_test_once(suite: ModuleType) -> None:
    """test_auth.py's JWT tests skip against the open server and pass against the JWT one: passed, once."""
    first = suite.Outcome("sqlite", seconds=10, status=0)
    first.passed = ["tests/test_kv.py::a", "tests/test_auth.py::test_producer_sub_ignored_from_body_without_auth"]
    first.skipped = [
        ("tests/test_auth.py::test_producer_sub_stamped_from_jwt", "set JWT_SECRET to run"),
        ("tests/test_auth.py::test_producer_sub_spoofing_ignored_with_jwt", "set JWT_SECRET to run"),
    ]
    jwt = suite.Outcome("sqlite", seconds=2, status=0)
    jwt.passed = [
        "tests/test_auth.py::test_producer_sub_stamped_from_jwt",
        "tests/test_auth.py::test_producer_sub_spoofing_ignored_with_jwt",
    ]
    jwt.skipped = [("tests/test_auth.py::test_producer_sub_ignored_from_body_without_auth", "JWT_SECRET set")]
    first.merge(jwt)
    assert first.total == 4
    assert (len(first.passed), first.failed, first.skipped) == (4, [], [])
    assert (first.seconds, first.status) == (12, 0)


def test_a_failure_in_either_run_stays_a_failure(suite: ModuleType) -> None:
    first = suite.Outcome("postgres")
    first.passed = ["tests/test_auth.py::x"]
    second = suite.Outcome("postgres", status=1)
    second.failed = [("tests/test_auth.py::x", "assert None == 'alice'")]
    first.merge(second)
    assert (first.passed, first.failed, first.status) == ([], [("tests/test_auth.py::x", "assert None == 'alice'")], 1)


def test_the_jwt_run_takes_test_auth_unless_other_tests_are_named(suite: ModuleType) -> None:
    assert suite.jwt_selection([]) == ["tests/test_auth.py"]
    assert suite.jwt_selection(["-k", "kv"]) == ["tests/test_auth.py"]
    assert suite.jwt_selection(["tests/test_kv.py"]) is None
    assert suite.jwt_selection(["tests/test_auth.py::test_producer_sub_stamped_from_jwt", "tests/test_kv.py"]) == [
        "tests/test_auth.py::test_producer_sub_stamped_from_jwt"
    ]
    assert suite.jwt_env("s") == {"JWT_ENABLED": "true", "JWT_SECRET": "s", "JWT_ALGORITHM": "HS256"}
