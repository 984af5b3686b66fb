"""Where SQL and database branches may live (issue 29's seam, kept by a test).

SQL text and checks of which database is in use belong to each concept's
``store/`` package, to ``plumbing/db.py`` (the one module that knows the
connection), to migrations and, for the vendor, to settings. Anywhere else
they are rules mixed with one database's dialect: this test names the file
and the line.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "queenadmin"

#: A string that starts like a statement: an SQL keyword, then a space
#: and anything but a URL path ("DELETE /kv/{ns}" is a route, not SQL).
SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|UNLISTEN|NOTIFY|PRAGMA|CREATE|DROP|ALTER|SET|LOCK|"
    r"BEGIN|COMMIT|ROLLBACK|VACUUM|ANALYZE|TRUNCATE|EXPLAIN)\s+(?!/)",
)


def _allowed_sql(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return "/store/" in f"/{rel}" or rel == "plumbing/db.py" or rel.startswith("migrations/")


def _allowed_vendor(path: Path) -> bool:
    return _allowed_sql(path) or path.relative_to(PACKAGE).as_posix() == "settings.py"


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _sql_literals(path: Path) -> list[str]:
    found = []
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    for token in tokens:
        if token.type != tokenize.STRING:
            continue
        # The text inside the quotes, whatever the prefix (f, r, b).
        body = token.string.lstrip("bBrRfFuU").strip("\"'")
        if SQL.match(body):
            found.append(f"{path.relative_to(ROOT)}:{token.start[0]}: {body[:60]}")
    return found


def _vendor_checks(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr == "vendor":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .vendor")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} if len(node.args) > 1 else set()
            if any(name.endswith("Store") and name != "Store" for name in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: isinstance(..., {sorted(names)})")
    return found


def test_no_sql_outside_the_stores_and_the_db_seam():
    found = [hit for path in _sources() if not _allowed_sql(path) for hit in _sql_literals(path)]
    assert found == []


def test_no_database_branch_outside_the_stores_the_db_seam_and_settings():
    found = [hit for path in _sources() if not _allowed_vendor(path) for hit in _vendor_checks(path)]
    assert found == []


def test_the_checks_see_what_they_look_for():
    """The scanners find a statement and a vendor branch where there is one
    (a seam module holds both), so an empty answer above means something."""
    db = PACKAGE / "plumbing" / "db.py"
    assert _sql_literals(db)
    assert _vendor_checks(db)
