"""The parts of /api/v1/openapi.json that ninja cannot see.

The routers parse request bodies by hand, so ``body_of`` names each body's
model; and some answers come from outside an operation's ``response=``
(the bearer check, the body limit), so ``complete`` adds them to every
operation they apply to. ``tests/api/test_contract.py`` holds the result
to what the server really answers.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from queenadmin.api.schemas.common import AuthErrorOut, ForbiddenOut, UnavailableOut

#: Component schemas collected from ``body_of``; merged into /api/openapi.json.
SCHEMAS: dict[str, Any] = {}


def component(model: type[BaseModel]) -> dict[str, Any]:
    """Register ``model`` (and the models it uses) as components; return its ``$ref``."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        SCHEMAS[name] = definition
    SCHEMAS[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def body_of(model: type[BaseModel], *, array_too: bool = False, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` naming ``model`` as the JSON request body."""
    ref = component(model)
    if array_too:
        item_ref = SCHEMAS[model.__name__]["properties"]["operations"]["items"]
        ref = {"oneOf": [ref, {"type": "array", "items": item_ref}]}
    return {"requestBody": {"required": required, "content": {"application/json": {"schema": ref}}}}


def etag_header() -> dict[str, Any]:
    """``openapi_extra`` for the single-key read: 200 carries ``ETag`` when found."""
    etag = {"description": 'the version, quoted ("42"), when the key was found', "schema": {"type": "string"}}
    return {"responses": {200: {"headers": {"ETag": etag}}}}


_RETRY_AFTER = {"description": "whole seconds until the call would be admitted", "schema": {"type": "integer"}}
_WWW_AUTHENTICATE = {"description": "Bearer", "schema": {"type": "string"}}
#: The body limit answers before any route runs (protocol 1.1).
_TOO_LARGE_TEXT = {"text/plain": {"schema": {"type": "string", "description": "the body is over 64 MiB"}}}


def _add_forbidden(responses: dict[Any, Any], ref: dict[str, Any], scope: str) -> None:
    why = f"the token's scope is below what the call needs ({scope})"
    declared = responses.get(403)
    if declared is None:
        responses[403] = {"description": f"Forbidden: {why}", "content": {"application/json": {"schema": ref}}}
        return
    schema = declared["content"]["application/json"]["schema"]
    declared["content"]["application/json"]["schema"] = {"anyOf": [schema, ref]}
    declared["description"] = f"{declared.get('description') or 'Forbidden'}, or {why}"


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the answers every operation can give that no ``response=`` names.

    - 401 from the bearer check on every operation behind it;
    - 403 from the scope check on every operation a ``read`` token cannot
      always call (``x-token-scope``, set by ``scopes.ScopedRouter``); merged with
      a 403 the operation declares itself (the timer horizon);
    - 413 in plain text from the body limit on every operation with a body;
    - ``Retry-After`` on every 429;
    - 503 with ``Retry-After`` on every operation: the database connection
      was lost or refused (``ApiErrorMiddleware.process_exception``).
    """
    auth_ref = component(AuthErrorOut)
    forbidden_ref = component(ForbiddenOut)
    unavailable_ref = component(UnavailableOut)
    for methods in schema.get("paths", {}).values():
        for operation in methods.values():
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
            if operation.get("x-token-scope", "read") != "read":
                _add_forbidden(responses, forbidden_ref, operation["x-token-scope"])
            if "requestBody" in operation:
                too_large = responses.setdefault(413, {"description": "Payload Too Large"})
                too_large.setdefault("content", {}).update(_TOO_LARGE_TEXT)
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
