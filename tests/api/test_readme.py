"""The README and docs/ run as written: their client examples and every shell snippet, against a live server.

The same rules hold in README.md and in every ``docs/*.md``: a shell or Python
block is run here, or a marker before it says why not.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import IS_POSTGRES, ROOT

pytestmark = pytest.mark.live

#: Every file whose commands a newcomer may copy: the README first, then docs/.
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _text(path=None) -> str:
    """One file's text, or all of them (README first) when ``path`` is None."""
    return "\n".join(p.read_text() for p in ([path] if path else DOCS))


def test_the_docs_are_there():
    """README.md is the five-minute read; the rest lives in docs/."""
    names = {p.name for p in DOCS}
    assert {"README.md", "clients.md", "concepts.md", "operations.md", "routes.md"} <= names
    assert (ROOT / "README.md").stat().st_size <= 20_000


def test_the_readme_client_example_runs(live_server):
    readme = _text(ROOT / "README.md")
    example = re.search(r"```python\n(import asyncio\nfrom queen import Queen\n.*?)```", readme, re.S).group(1)
    assert 'url="http://127.0.0.1:8000"' in example
    assert 'bearer_token="qa_..."' in example
    code = example.replace("http://127.0.0.1:8000", live_server.url).replace("qa_...", live_server.token)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # The client prints its own shutdown lines; the example prints one line.
    printed = re.search(r"^(\d+) (True|False)$", done.stdout, re.M)
    assert printed is not None, done.stdout
    assert int(printed.group(1)) > 0
    assert printed.group(2) == "True"


def test_the_readme_consumer_example_runs(live_server):
    """The message-log example, exactly as printed: push, pop and ack, then a
    new group consumes the three orders one at a time (docs/concepts.md)."""
    readme = _text()
    blocks = re.findall(r"```python\n(import asyncio\nfrom queen import Queen\n.*?)```", readme, re.S)
    (example,) = [b for b in blocks if ".consume(handler)" in b]
    code = example.replace("http://127.0.0.1:8000", live_server.url).replace("qa_...", live_server.token)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("billing ")]
    assert lines == ["billing {'order': 1}", "billing {'order': 2}", "billing {'order': 3}"]


def test_the_readme_streams_example_runs(live_server):
    """The streams example, as printed: three of five orders pass the filter,
    the map turns them into invoices on the sink queue (docs/concepts.md)."""
    readme = _text()
    blocks = re.findall(r"```python\n(import asyncio\nfrom queen import Queen, Stream\n.*?)```", readme, re.S)
    (example,) = blocks
    code = example.replace("http://127.0.0.1:8000", live_server.url).replace("qa_...", live_server.token)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("invoice "))
    assert lines == [
        "invoice {'id': 3, 'vat': 6.0}",
        "invoice {'id': 4, 'vat': 8.0}",
        "invoice {'id': 5, 'vat': 10.0}",
    ]


# --------------------------------------------------------------------------
# Every snippet

#: A fenced block, with the marker line before it if any:
#: ``<!-- readme: not run (why) -->``, ``<!-- readme: checked by test_x -->``,
#: ``<!-- readme: postgresql -->`` or ``<!-- readme: sqlite -->`` (run on that database only).
FENCE = re.compile(r"(?:<!-- readme: (?P<mark>[^\n]*?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)
RUNNABLE = ("sh", "python")
#: docs/ files with no shell or Python block (reference tables).
QUIET = ("dashboard.md", "design.md", "reference.md", "routes.md", "settings.md", "testing.md")


def _snippets(path=None) -> list[tuple[str, str | None, str]]:
    """The fenced blocks of one file, or of README.md and every docs/*.md."""
    return [(m["lang"], m["mark"], m["code"]) for m in FENCE.finditer(_text(path))]


def test_every_readme_snippet_is_run_or_says_why():
    """Each shell and Python block is run by a test here, or its marker says why not."""
    snippets = [s for s in _snippets() if s[0] in RUNNABLE]
    assert len(snippets) > 10
    for path in DOCS:  # each file holds some, so a file dropped from DOCS shows here
        assert [s for s in _snippets(path) if s[0] in RUNNABLE] or path.name in QUIET, path.name
    for lang, mark, code in snippets:
        if mark is None or mark in ("postgresql", "sqlite"):
            assert lang == "sh", f"unmarked {lang} snippets are not run:\n{code}"
        elif mark.startswith("checked by "):
            assert callable(globals().get(mark.removeprefix("checked by "))), mark
        else:
            assert re.fullmatch(r"not run \(.{10,}\)", mark), f"a not-run snippet says why: {mark!r}\n{code}"


def test_the_readme_shell_snippets_run(live_server, tmp_path):
    """Every shell block of README.md and docs/*.md not marked otherwise runs as printed against a live server.

    Three things are pointed at the test's server: its URL for
    ``http://127.0.0.1:8000``, its data directory for ``data/``, and its
    database (``DATABASE_URL`` in the environment, as the README says to
    export). ``make`` runs with ``-o .venv/.installed``: without it, a
    pyproject.toml newer than the install stamp would reinstall the shared
    virtualenv in the middle of the suite.
    """
    database = "postgresql" if IS_POSTGRES else "sqlite"
    data_dir = live_server.env["QUEENADMIN_DATA_DIR"]
    # As from a user's shell: under ``make test`` the inherited MAKELEVEL
    # makes ``make token`` print "make[1]: Leaving directory" last.
    env = {k: v for k, v in live_server.env.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    ran = 0
    for lang, mark, code in _snippets():
        if lang != "sh" or mark not in (None, database):
            continue
        script = (
            code.replace("http://127.0.0.1:8000", live_server.url)
            .replace("make token", "make -o .venv/.installed token")
            .replace("data/", f"{data_dir}/")
        )
        before = set(ROOT.iterdir())
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        for created in set(ROOT.iterdir()) - before:  # pg_dump's file
            created.unlink()
        assert done.returncode == 0, f"{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        assert done.stdout.strip(), code
        ran += 1
    assert ran >= 5
