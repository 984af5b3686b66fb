"""Every link between README.md, docs/ and bench/README.md leads somewhere: the file, and the heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

FILES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose(path: Path) -> str:
    """The text without fenced blocks and inline code, where a ``](`` is not a link."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_anchor(m[1]) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", _prose(path)):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, _, fragment = link.partition("#")
        resolved = (path.parent / target).resolve() if target else path
        missing_anchor = fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(link)
    assert not broken, broken


def test_the_anchor_rule():
    assert _anchor("Compatibility with the `queen-mq` 2.6.0 client") == "compatibility-with-the-queen-mq-260-client"
    assert _anchor("Conflation (last-value delivery)") == "conflation-last-value-delivery"
