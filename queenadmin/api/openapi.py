"""The parts of /api/v1/openapi.json that ninja cannot see.

The routers parse request bodies by hand, so ``body_of`` names each body's
model (routes declare it through ``scopes.ScopedRouter.with_body``); and some answers come from outside an operation's ``response=``
(the bearer check, the body limit), so ``complete`` adds them to every
operation they apply to. ``tests/api/test_contract.py`` holds the result
to what the server really answers.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from queenadmin.api import grants, routes
from queenadmin.api.errors import AUTH_ERROR, FORBIDDEN, NO_ROUTE, UNAVAILABLE, UNSUPPORTED_MEDIA_TYPE
from queenadmin.api.wire.fields import Declared

#: Component schemas collected from ``body_of``; merged into /api/openapi.json.
SCHEMAS: dict[str, Any] = {}


def component(model: type[BaseModel] | Declared) -> dict[str, Any]:
    """Register ``model`` (and the models it uses) as components; return its ``$ref``.

    ``model`` is a ninja ``Schema`` (pydantic), or the declaration a wire
    parser reads (``wire.fields``).
    """
    if not isinstance(model, type):
        SCHEMAS.update(model.components())
        return {"$ref": f"#/components/schemas/{model.name}"}
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        SCHEMAS[name] = definition
    SCHEMAS[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def body_of(model: type[BaseModel] | Declared, *, array_too: bool = False, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` naming ``model`` as the JSON request body.

    ``array_too``: the body may also be the bare ``operations`` array.
    ``required=False``: no body is the same as ``{}`` (so is ``null``: the
    model says so, ``schemas.common.nullable``).
    """
    ref = component(model)
    if array_too:
        operations = SCHEMAS[ref["$ref"].rpartition("/")[2]]["properties"]["operations"]
        ref = {"oneOf": [ref, {k: v for k, v in operations.items() if k != "description"}]}
    return {"requestBody": {"required": required, "content": {"application/json": {"schema": ref}}}}


#: ``openapi_extra`` key of ``parameters``; ``complete`` merges it into the
#: parameters ninja lists (it knows a path parameter's name, not its rules).
PARAMETERS_KEY = "x-queenadmin-parameters"


def parameters(*, path: dict[str, Any] | None = None, query: dict[str, Any] | None = None) -> dict[str, Any]:
    """``openapi_extra`` with the schemas of path parameters and the query parameters a route reads.

    ``query`` maps a name to its schema; ``"required": True`` in it makes the
    parameter required.
    """
    listed = [{"name": name, "in": "path", "required": True, "schema": schema} for name, schema in (path or {}).items()]
    for name, schema in (query or {}).items():
        schema = dict(schema)
        required = schema.pop("required", False)
        listed.append({"name": name, "in": "query", "required": required, "schema": schema})
    return {PARAMETERS_KEY: listed}


def _merge_parameters(operation: dict[str, Any]) -> None:
    given = operation.pop(PARAMETERS_KEY, None)
    if not given:
        return
    listed = operation.setdefault("parameters", [])
    for parameter in given:
        same = next((p for p in listed if (p["name"], p["in"]) == (parameter["name"], parameter["in"])), None)
        if same is None:
            listed.append(parameter)
        else:
            same["schema"] = {**same.get("schema", {}), **parameter["schema"]}


def etag_header() -> dict[str, Any]:
    """``openapi_extra`` for the single-key read: 200 carries ``ETag`` when found."""
    etag = {"description": 'the version, quoted ("42"), when the key was found', "schema": {"type": "string"}}
    return {"responses": {200: {"headers": {"ETag": etag}}}}


_RETRY_AFTER = {"description": "whole seconds until the call would be admitted", "schema": {"type": "integer"}}
_WWW_AUTHENTICATE = {"description": "Bearer", "schema": {"type": "string"}}
#: The body limit answers before any route runs (protocol 1.1).
_TOO_LARGE_TEXT = {"text/plain": {"schema": {"type": "string", "description": "the body is over 64 MiB"}}}


def _add_alternative(responses: dict[Any, Any], status: int, ref: dict[str, Any], why: str) -> None:
    """Document ``ref`` as an answer of ``status``, beside one the operation declares."""
    declared = responses.get(status)
    if declared is None:
        responses[status] = {"description": why, "content": {"application/json": {"schema": ref}}}
        return
    schema = declared["content"]["application/json"]["schema"]
    declared["content"]["application/json"]["schema"] = {"anyOf": [schema, ref]}
    declared["description"] = f"{declared.get('description') or why.partition(':')[0]}, or {why.partition(': ')[2]}"


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the answers every operation can give that no ``response=`` names.

    - 401 from the bearer check on every operation behind it;
    - 403 from the scope check on every operation a ``read`` token cannot
      always call (``x-token-scope``, set by ``scopes.ScopedRouter``), from
      the level check on every other one (Queen's write-only level, of a JWT
      or of our token, reads nothing), and from
      a token's grants on every operation whose rule can refuse
      (``x-token-grants``, ``grants.ROUTES``); merged with a 403 the
      operation declares itself (the timer horizon);
    - 404 ``no_such_route`` on every operation with a path parameter: a
      value the route's pattern cannot match (a newline) reaches no route;
    - 413 in plain text from the body limit on every operation with a body
      (a zstd body's limit holds for what it inflates to), and 415 for a
      ``Content-Encoding`` the server does not read (``api/bodies.py``);
    - ``Retry-After`` on every 429;
    - 503 with ``Retry-After`` on every operation: the database connection
      was lost or refused (``ApiErrorMiddleware.process_exception``);

    and the parameter rules given with ``parameters``.
    """
    auth_ref = component(AUTH_ERROR.model)
    forbidden_ref = component(FORBIDDEN.model)
    unavailable_ref = component(UNAVAILABLE.model)
    no_route_ref = component(NO_ROUTE.model)
    unsupported_ref = component(UNSUPPORTED_MEDIA_TYPE.model)
    for methods in schema.get("paths", {}).values():
        for operation in methods.values():
            _merge_parameters(operation)
            responses = operation.setdefault("responses", {})
            if operation.get("security"):
                responses.setdefault(
                    401,
                    {
                        "description": "Unauthorized",
                        "headers": {"WWW-Authenticate": _WWW_AUTHENTICATE},
                        "content": {"application/json": {"schema": auth_ref}},
                    },
                )
            refusals = []
            if operation.get("x-token-scope", "read") != "read":
                refusals.append(f"the token's scope is below what the call needs ({operation['x-token-scope']})")
            elif operation.get("security"):
                # Queen's write-only level (a JWT's, our token's) reaches only
                # its pushes: every read-scope route refuses it (api/bearer.py).
                refusals.append("the token is of the write-only level (a JWT or ours), which reads nothing")
            if operation.get(grants.OPENAPI_KEY) == routes.NAMED:
                refusals.append("no grant of the token covers a resource the call names")
            elif operation.get(grants.OPENAPI_KEY) == routes.EVERY:
                refusals.append("the call reaches every queue and the token's grants do not cover queue:*")
            if refusals:
                _add_alternative(responses, 403, forbidden_ref, "Forbidden: " + "; or ".join(refusals))
            if any(p["in"] == "path" for p in operation.get("parameters", ())):
                _add_alternative(responses, 404, no_route_ref, "Not Found: the path matches no route")
            if "requestBody" in operation:
                too_large = responses.setdefault(413, {"description": "Payload Too Large"})
                too_large.setdefault("content", {}).update(_TOO_LARGE_TEXT)
                responses.setdefault(
                    415,
                    {
                        "description": "Unsupported Media Type: a Content-Encoding other than identity or zstd",
                        "content": {"application/json": {"schema": unsupported_ref}},
                    },
                )
            if 429 in responses:
                responses[429].setdefault("headers", {})["Retry-After"] = _RETRY_AFTER
            responses.setdefault(
                503,
                {
                    "description": "Service Unavailable: the database connection was lost or refused; retry",
                    "headers": {"Retry-After": _RETRY_AFTER},
                    "content": {"application/json": {"schema": unavailable_ref}},
                },
            )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(SCHEMAS)
    return schema
