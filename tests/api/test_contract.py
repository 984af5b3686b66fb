"""Every answer the API suite got matches the OpenAPI document we publish.

The routers parse bodies and build answers by hand (the fast path, and the
protocol's exact reason codes), so nothing at run time ties an answer to
its declared schema. This check does: ``tests/api/conftest.py`` records
every answer of the session (in-process clients and live servers alike),
and the first test below, which runs last, validates each one, matched by
method, path template and status, against ``/api/v1/openapi.json``. The
second holds the document itself to answers whose keys are all named.

The recorded answers are read from the folder ``QUEENADMIN_RECORD_ANSWERS``
names; when the check fails the folder is kept, and the summary says where.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from queenadmin.api import recording

pytestmark = pytest.mark.django_db

BASE = "urn:queenadmin:openapi"
#: The API's own documentation routes: not operations of the API.
DOC_ROUTES = {"/api/v1/openapi.json", "/api/v1/docs"}


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def read_answers(folder: Path) -> list[dict[str, Any]]:
    answers = []
    for path in sorted(folder.glob("answers-*.jsonl")):
        # Split on newlines only: str.splitlines() also splits inside a body at
        # U+2028, U+0085 and the like, which JSON leaves unescaped.
        answers.extend(json.loads(line) for line in path.read_text().split("\n") if line)
    return answers


class Checker:
    """Validates recorded answers against one OpenAPI document."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.registry: Registry[Any] = Registry().with_resource(BASE, Resource(document, DRAFT202012))
        self.validators: dict[str, Draft202012Validator] = {}

    def operation(self, method: str, route: str | None) -> dict[str, Any] | None:
        if route is None:
            return None
        op: dict[str, Any] | None = self.document["paths"].get(route, {}).get(method.lower())
        return op

    def problems(self, answer: dict[str, Any], op: dict[str, Any]) -> list[str]:
        """What is wrong with ``answer`` for ``op`` (nothing: an empty list)."""
        status = str(answer["status"])
        declared = op["responses"].get(status)
        if declared is None:
            return [f"status {status} is not declared (declared: {', '.join(op['responses'])})"]
        content = declared.get("content")
        if not content:
            return [] if not answer["body"] else [f"status {status} declares no body, got {answer['body'][:80]!r}"]
        media = (answer["contentType"] or "").split(";")[0].strip()
        if media not in content:
            return [f"content type {media!r} is not declared (declared: {', '.join(content)})"]
        if media != "application/json":
            # Plain text (the body limit's 413): any string.
            return []
        try:
            body = json.loads(answer["body"])
        except ValueError:
            return [f"the body is not JSON: {answer['body'][:80]!r}"]
        ref = "#/" + _pointer("paths", answer["route"], answer["method"].lower(), "responses", status)
        ref += "/" + _pointer("content", media, "schema")
        validator = self.validators.get(ref)
        if validator is None:
            validator = Draft202012Validator({"$ref": BASE + ref}, registry=self.registry)
            self.validators[ref] = validator
        return [_describe(error) for error in validator.iter_errors(body)]


def _describe(error: ValidationError) -> str:
    if error.validator in ("anyOf", "oneOf") and error.context:
        # A result element, say: name what the closest branch missed.
        branches: dict[Any, list[ValidationError]] = defaultdict(list)
        for sub in error.context:
            branches[sub.relative_schema_path[0]].append(sub)
        closest = min(branches.values(), key=lambda errors: (len(errors), -max(len(e.path) for e in errors)))
        return "; ".join(_describe(sub) for sub in closest[:3])
    return f"{error.json_path}: {error.message[:200]}"


def test_every_recorded_answer_matches_the_published_schema(contract):
    """Each answer of the session is declared for its route and status, and its body matches the schema."""
    if contract.api_tests_run == 0:
        pytest.skip("no API test ran in this session, so there are no answers to check")
    answers = read_answers(contract.folder)
    assert answers, (
        f"{contract.api_tests_run} API tests ran but nothing was recorded in {contract.folder}: "
        f"is {recording.ENV} reaching the servers and the test clients?"
    )
    document = Client().get("/api/v1/openapi.json").json()
    checker = Checker(document)
    failures: dict[tuple[str, str, int, str], list[str]] = defaultdict(list)
    # Many answers are byte for byte the same (the same call in many
    # tests): each distinct one is checked once and counted as often as
    # it was recorded.
    distinct: Counter[tuple[Any, ...]] = Counter(
        (a["method"], a["route"], a["status"], a["path"], a["contentType"], a["body"]) for a in answers
    )
    for (method, route, status, path, content_type, body), seen in distinct.items():
        if route in DOC_ROUTES:
            continue
        answer = {
            "method": method,
            "route": route,
            "status": status,
            "path": path,
            "contentType": content_type,
            "body": body,
        }
        op = checker.operation(method, route)
        if op is None:
            where = (method, path if route is None else route, status)
            contract.outside[where] += seen
            if not _outside_is_expected(answer):
                failures[(*where, "no such operation in the schema")].extend([body] * seen)
            continue
        for problem in checker.problems(answer, op):
            failures[(method, route, status, problem)].extend([body] * seen)
        contract.checked[(method, route, status)] += seen
    lines = [f"{m} {r} {s}: {p} ({len(bodies)}x, e.g. {bodies[0][:200]})" for (m, r, s, p), bodies in failures.items()]
    contract.failed = bool(lines)
    assert not lines, "answers that do not match /api/v1/openapi.json:\n" + "\n".join(sorted(lines))


def _outside_is_expected(answer: dict[str, Any]) -> bool:
    # Two answers come from outside the API's operations: the catch-all 404
    # for unknown /api paths (urls.no_such_route), and the 405 for a method
    # a route does not have.
    if answer["status"] == 405:
        return True
    if answer["status"] != 404 or answer["contentType"] != "application/json":
        return False
    return bool(json.loads(answer["body"]) == {"code": "no_such_route", "error": "not found", "path": answer["path"]})


def _open_objects(schema: Any, document: dict[str, Any], seen: set[str]) -> list[str]:
    """Object schemas under ``schema`` that admit keys they do not name."""
    if isinstance(schema, list):
        return [found for item in schema for found in _open_objects(item, document, seen)]
    if not isinstance(schema, dict):
        return []
    ref = schema.get("$ref")
    if ref is not None:
        if ref in seen:
            return []
        seen.add(ref)
        name = ref.rsplit("/", 1)[-1]
        found = _open_objects(document["components"]["schemas"][name], document, seen)
        return [f"{name}: {problem}" for problem in found]
    found = []
    extra = schema.get("additionalProperties")
    # A typed map (``dict[str, Model]``: a consumer group's queues by name)
    # is closed too: its keys are data, each value names its keys.
    if schema.get("type") == "object" and extra is not False and not (isinstance(extra, dict) and extra):
        found.append(f"an open object {schema.get('title', '')}".rstrip())
    for key, value in schema.items():
        if key != "properties":
            found.extend(_open_objects(value, document, seen))
    for value in schema.get("properties", {}).values():
        found.extend(_open_objects(value, document, seen))
    return found


def test_every_declared_answer_is_a_closed_object():
    """No operation answers a free-form dict: each JSON answer names its keys (a value or payload aside)."""
    document = Client().get("/api/v1/openapi.json").json()
    problems = []
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            if not any(status.startswith("2") for status in op["responses"]):
                problems.append(f"{method.upper()} {path}: no success answer declared")
            for status, answer in op["responses"].items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema")
                if schema is None and status != "204" and "text/plain" not in answer.get("content", {}):
                    problems.append(f"{method.upper()} {path} {status}: no body declared")
                for problem in _open_objects(schema, document, set()):
                    problems.append(f"{method.upper()} {path} {status}: {problem}")
    assert not problems, "\n".join(problems)
