"""No template or dashboard script spells a path of the site by hand.

Every attribute that holds a URL (``href``, ``src``, ``action``,
``formaction``, the ``hx-`` verbs, ``hx-push-url``, ``ws-connect``) takes
its path from what knows it:

- ``{% url %}``, which reverses ``urls.py`` (a stored name in a path goes
  through its converter, ``links.NameConverter``, the one spelling of
  names), or ``{% static %}``;
- a variable (``{{ ... }}``) a view or the context built with ``reverse``;
- then, after that path, only a query or a fragment: ``{% url 'dashboard:locks'
  %}?name={{ name|urlencode }}``.

Also allowed, because they name no path of this site: a value that is
only a query (``?after=...``) or only a fragment (``#main``), which the
browser resolves against the page it shows; an empty ``href`` (this page
again); ``hx-push-url="true"`` (a flag: push the URL just requested); and
absolute links to other sites (``https://...``).

So a literal ``/`` at the start of a value (``href="/locks/"``), a literal
path after a tag (``{% url 'dashboard:timers' %}move/``) and a link to this
site by host (``http://localhost/...``, ``//host/...``) all fail. The
dashboard's script (``static/queenadmin/*.js``) builds no path either, nor
does its Python (``queenadmin/dashboard``, ``queenadmin/templatetags``):
no string there starts a path, save in ``PATH_CLASSIFIERS``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
SCRIPTS = ROOT / "static" / "queenadmin"
PYTHON = [ROOT / "queenadmin" / "dashboard", ROOT / "queenadmin" / "templatetags"]
#: Modules that name paths to sort requests by them, not to link: which
#: answers are for machines (the API, /metrics, /health: not dashboard
#: routes, so none of ``dashboard:``'s names).
PATH_CLASSIFIERS = {"queenadmin/dashboard/views/errors.py"}

#: Attributes whose value is a URL.
URL_ATTRIBUTES = re.compile(
    r"""(?<![\w-])(href|src|action|formaction|hx-get|hx-post|hx-put|hx-patch|hx-delete|hx-push-url|ws-connect)=(["'])""",
    re.IGNORECASE,
)
#: A template tag or variable inside a value.
TAG = re.compile(r"\{%.*?%\}|\{\{.*?\}\}", re.DOTALL)
#: The tags that give a whole path.
PATH_TAG = re.compile(r"\{%\s*(url|static)\s.*?%\}|\{\{.*?\}\}", re.DOTALL)
#: Another site, named in full (a scheme and a host that is not ours).
EXTERNAL = re.compile(r"^https://(?!localhost\b|127\.0\.0\.1\b|testserver\b)[\w.-]+\.[a-z]{2,}(/|$)", re.IGNORECASE)


def _values(text: str) -> list[tuple[int, str, str]]:
    """Each URL attribute's (line, name, value), template tags kept whole
    (a tag's own quotes do not end the value)."""
    found = []
    for match in URL_ATTRIBUTES.finditer(text):
        quote, at = match.group(2), match.end()
        value = []
        while at < len(text) and text[at] != quote:
            tag = TAG.match(text, at)
            if tag:
                value.append(tag.group())
                at = tag.end()
            else:
                value.append(text[at])
                at += 1
        found.append((text.count("\n", 0, match.start()) + 1, match.group(1), "".join(value)))
    return found


def hard_coded(value: str) -> str | None:
    """Why ``value`` spells a path of this site by hand, or None."""
    if value == "" or value[0] in "?#" or EXTERNAL.match(value):
        return None
    head = PATH_TAG.match(value)
    if head is None:
        if TAG.match(value):
            # {% if %} and the like: each literal part is judged alone.
            parts = [part for part in TAG.split(value) if part]
            reasons = [hard_coded(part) for part in parts]
            return next((reason for reason in reasons if reason), None)
        return "a literal path or URL"
    rest = value[head.end() :]
    # Whatever follows the path is a query or a fragment, or more tags that
    # give them (``{{ first_query }}``); never literal path text.
    literal = TAG.sub("", rest)
    if literal and literal[0] not in "?#":
        return f"literal path text {literal.split('?')[0].split('#')[0]!r} after {head.group()!r}"
    return None


def offenders() -> list[str]:
    found = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        for line, name, value in _values(path.read_text()):
            if name.lower() == "hx-push-url" and value in ("true", "false"):
                continue
            reason = hard_coded(value)
            if reason:
                found.append(f"{path.relative_to(ROOT)}:{line}: {name}={value!r}: {reason}")
    return found


def test_templates_take_every_path_from_url_or_a_view():
    """Every URL attribute of every template starts with ``{% url %}``,
    ``{% static %}`` or a view's variable, or is a query, a fragment or
    another site (the module docstring says why)."""
    assert offenders() == []


def test_the_dashboards_scripts_build_no_path():
    """``static/queenadmin/*.js`` holds no string that starts a path: a page
    gives its script any URL it needs."""
    for path in sorted(SCRIPTS.glob("*.js")):
        text = path.read_text()
        assert not re.findall(r"""["'`]/(?![/*])""", text), path.name


def test_the_dashboards_python_builds_no_path():
    """No string constant in the dashboard's modules starts a path
    (``"/locks/"``, ``"/timers/?"``): views link and redirect by
    ``reverse``."""
    found = []
    for folder in PYTHON:
        for path in sorted(folder.rglob("*.py")):
            name = str(path.relative_to(ROOT))
            if name in PATH_CLASSIFIERS:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.match(r"/\w", node.value):
                    found.append(f"{name}:{node.lineno}: {node.value!r}")
    assert found == []


def test_the_check_finds_what_it_is_for():
    """The check itself: what it refuses and what it lets through."""
    refused = [
        "/locks/",
        "/",
        "/api/v1/docs",
        "/audit/{{ e.pk }}/revert/",
        "{% url 'dashboard:timers' %}move/",
        "{{ queue_url }}leases/",
        "http://localhost:8000/",
        "//example.com/x",
        "{% if x %}/a/{% endif %}",
    ]
    allowed = [
        "",
        "#main",
        "?after={{ next_after|urlencode:'' }}",
        "{% url 'dashboard:locks' %}",
        "{% url 'dashboard:locks' %}?name={{ n|urlencode }}",
        '{% url "dashboard:queue" queue.name %}#queue-dlq',
        "{% static 'queenadmin/queenadmin.css' %}",
        "{{ leases_url }}{{ next_query }}",
        "{{ r.url }}",
        "https://github.com/smartpricing/queen",
        "{% if x %}{% url 'dashboard:kv' %}{% endif %}",
    ]
    assert [value for value in refused if hard_coded(value) is None] == []
    assert [value for value in allowed if hard_coded(value) is not None] == []
    text = """<a href="{{ q.name|f:"purge" }}x">a</a> <form action='/x/'>"""
    assert [(name, value) for _, name, value in _values(text)] == [
        ("href", '{{ q.name|f:"purge" }}x'),
        ("action", "/x/"),
    ]
