"""The one settings list (queenadmin/conf.py, issue 38): docs/settings.md is
made from it, the environment is read once and only for what it declares,
and every variable the project's files name is declared."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from queenadmin import conf
from tests.conftest import ROOT

QUEENADMIN = ROOT / "queenadmin"


def test_docs_settings_md_is_what_the_list_makes():
    """docs/settings.md drifts from conf.py's list: remake it with
    ``python -m queenadmin.conf --markdown > docs/settings.md``."""
    assert (ROOT / "docs" / "settings.md").read_text() == conf.markdown()


def test_the_generator_runs_without_django_settings():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run(
        [sys.executable, "-m", "queenadmin.conf", "--markdown"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout == conf.markdown()


def test_each_setting_is_declared_once_with_a_known_area_and_a_one_line_doc():
    variables = [declared.env for declared in conf.SETTINGS]
    assert len(variables) == len(set(variables))
    for declared in conf.SETTINGS:
        assert declared.group in conf.GROUPS
        assert declared.doc, declared.env
        assert "\n" not in declared.doc, declared.env
        assert declared.type in (bool, int, float, str), declared.env
    assert not set(conf.TEST_HOOKS) & set(conf.SETTINGS_BY_NAME)


def test_each_internal_constant_is_where_the_docs_say_and_no_setting():
    for name, where, value, _what in conf.INTERNAL_CONSTANTS:
        module = importlib.import_module("queenadmin." + where.removesuffix(".py").replace("/", "."))
        assert getattr(module, name) == value, name
        assert name not in conf.SETTINGS_BY_NAME, name


_LITERAL_READ = re.compile(r"""os\.(?:environ(?:\.get)?\s*[\[(]|getenv\()\s*["']([A-Z0-9_]+)["']""")


def test_settings_py_reads_the_environment_once_and_nothing_else_reads_a_setting():
    """settings.py: one read, ``conf.read_environ``. Elsewhere only
    prometheus_client's directory (serve sets it for its workers at run
    time) and Django's settings module are read by name."""
    assert (QUEENADMIN / "settings.py").read_text().count("os.environ") == 1
    read = set()
    for path in QUEENADMIN.rglob("*.py"):
        if path.name != "settings.py" or path.parent != QUEENADMIN:
            read |= set(_LITERAL_READ.findall(path.read_text()))
    assert read <= {"PROMETHEUS_MULTIPROC_DIR", "DJANGO_SETTINGS_MODULE"}


#: Names the project's files use that are no setting: tests' own variables,
#: Django's and the code's constants, prefixes in prose, serve's port for its
#: workers, the Django setting DATABASE_LISTEN_URL fills.
_NOT_SETTINGS = {
    "QUEENADMIN_TEST_DIRECT_URL",
    "QUEENADMIN_SERVE_PORT",
    "QUEENADMIN_DB_LISTEN_URL",
    "QUEENADMIN_RECORD",
    "QUEENADMIN_DB_",
    "QUEENADMIN_GC_FREEZE",
    "DJANGO_SETTINGS_MODULE",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "DJANGO_STARTED_RECEIVERS",
    "DJANGO_FINISHED_RECEIVERS",
    "DJANGO_SECURE_HSTS_",
}


def test_every_variable_the_project_names_is_declared():
    """Whatever tests/, .ci/, the Makefile, deploy/, examples/, bench/ and the
    README set or mention is in the list, a test hook or a test's own."""
    files = [ROOT / "Makefile", ROOT / "README.md"]
    for folder in ("tests", ".ci", "deploy", "examples", "bench", "docs"):
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file()
            and p.suffix in ("", ".py", ".md", ".ini")
            # What .gitignore keeps out: installed packages, the peers' cache.
            and not {"node_modules", "cache", "__pycache__"} & set(p.relative_to(ROOT).parts)
        ]
    named = set()
    for path in files:
        named |= set(re.findall(r"\b(QUEENADMIN_[A-Z0-9_]+|DJANGO_[A-Z0-9_]+|DATABASE_[A-Z_]*URL)\b", path.read_text()))
    known = {declared.env for declared in conf.SETTINGS}
    # Django's names of the app settings (override_settings), where the
    # environment's differs (Queen's JWT_* variables).
    known |= {f"QUEENADMIN_{declared.name}" for declared in conf.SETTINGS if declared.read_by == "app"}
    known |= {f"QUEENADMIN_{name}" for name in conf.TEST_HOOKS} | set(conf.TEST_ENV)
    assert named - known - _NOT_SETTINGS == set()


def _value(declared: conf.Setting[Any]) -> tuple[str, Any]:
    """A value other than the default, as the environment gives it and as read."""
    special = {
        "DB_POOLER": "transaction",
        "DB_LISTEN_URL": "postgresql://postgres@127.0.0.1:5432/listen",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "DEFAULT_SUBSCRIPTION_MODE": "new",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "DEBUG",
        "UVICORN_LOG_LEVEL": "INFO",
    }
    if declared.name in special:
        return special[declared.name], special[declared.name]
    if declared.type is bool:
        return ("0", False) if declared.default else ("yes", True)
    if declared.type is int:
        return str(declared.default + 3), declared.default + 3
    if declared.type is float:
        return str(declared.default + 0.5), declared.default + 0.5
    return "from-the-environment", "from-the-environment"


def _read_in_child(env: dict[str, str], code: str) -> Any:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("QUEENADMIN_", "DJANGO_", "PYTEST"))}
    base["DJANGO_SETTINGS_MODULE"] = "queenadmin.settings"
    base.pop("DATABASE_URL", None)
    script = f"import json, django; django.setup(); from django.conf import settings as s; {code}"
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env={**base, **env}, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_app_setting_and_test_hook_comes_from_the_environment(tmp_path: Path):
    """Each ``app`` setting's variable reaches ``conf.settings`` typed by its
    default (what every QUEENADMIN_<NAME> of conf.py did before the list);
    a test hook reaches ``conf.internal``."""
    app = [declared for declared in conf.SETTINGS if declared.read_by == "app"]
    env = {declared.env: _value(declared)[0] for declared in app}
    env.update({f"QUEENADMIN_{name}": "7.5" for name in conf.TEST_HOOKS})
    env["QUEENADMIN_DATA_DIR"] = str(tmp_path)
    names = [declared.name for declared in app]
    got = _read_in_child(
        env,
        "from queenadmin import conf; "
        f"print(json.dumps([[getattr(conf.settings, n) for n in {names!r}],"
        f" [conf.internal(n, 0.0) for n in {sorted(conf.TEST_HOOKS)!r}]]))",
    )
    assert dict(zip(names, got[0], strict=True)) == {declared.name: _value(declared)[1] for declared in app}
    assert got[1] == [7.5] * len(conf.TEST_HOOKS)


def test_start_settings_reach_djangos_settings(tmp_path: Path):
    got = _read_in_child(
        {
            "QUEENADMIN_DATA_DIR": str(tmp_path),
            "DJANGO_DEBUG": "1",
            "DJANGO_ALLOWED_HOSTS": "a.example,b.example",
            "QUEENADMIN_ORIGINS": "https://queen.example.com",
            "DJANGO_CSRF_TRUSTED_ORIGINS": "https://old.example.com",
            "QUEENADMIN_SQLITE_NO_PERSIST": "1",
            "QUEENADMIN_SQLITE_SYNCHRONOUS": "normal",
            "QUEENADMIN_CSP_REPORT_ONLY": "on",
        },
        "print(json.dumps([s.DEBUG, s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS, str(s.DATA_DIR),"
        " s.DATABASES['default']['CONN_MAX_AGE'], s.DATABASES['default']['OPTIONS']['init_command'],"
        " s.QUEENADMIN_CSP_REPORT_ONLY]))",
    )
    debug, hosts, origins, data_dir, max_age, init, report_only = got
    assert (debug, hosts, data_dir, max_age, report_only) == (True, ["a.example", "b.example"], str(tmp_path), 0, True)
    assert origins == ["https://queen.example.com", "https://old.example.com"]
    assert "synchronous=NORMAL" in init.replace(" ", "").replace("synchronous = ", "synchronous=")


def test_an_empty_variable_counts_as_unset(tmp_path: Path):
    got = _read_in_child(
        {"QUEENADMIN_DATA_DIR": str(tmp_path), "QUEENADMIN_HTTP_THREADS": "", "QUEENADMIN_KV_WRITE_RATE": ""},
        "from queenadmin import conf; print(json.dumps([conf.settings.HTTP_THREADS, conf.settings.KV_WRITE_RATE]))",
    )
    assert got == [4, 0.0]


def test_a_start_setting_is_not_read_through_conf():
    with pytest.raises(AttributeError, match=r"DATABASE_URL is read at start by `settings\.py`"):
        conf.settings.DATABASE_URL  # noqa: B018
