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
