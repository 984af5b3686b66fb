"""The README's client example runs as written against a live server."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.live


def test_the_readme_client_example_runs(live_server):
    readme = (ROOT / "README.md").read_text()
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
    new group consumes the three orders one at a time."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(import asyncio\nfrom queen import Queen\n.*?)```", readme, re.S)
    (example,) = [b for b in blocks if ".consume(handler)" in b]
    code = example.replace("http://127.0.0.1:8000", live_server.url).replace("qa_...", live_server.token)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("billing ")]
    assert lines == ["billing {'order': 1}", "billing {'order': 2}", "billing {'order': 3}"]
