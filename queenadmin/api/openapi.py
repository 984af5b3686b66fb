"""Document request bodies that the routers parse by hand."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

#: Component schemas collected from ``body_of``; merged into /api/openapi.json.
SCHEMAS: dict[str, Any] = {}


def body_of(model: type[BaseModel], *, array_too: bool = False, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` naming ``model`` as the JSON request body."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        SCHEMAS[name] = definition
    SCHEMAS[model.__name__] = schema
    ref: dict[str, Any] = {"$ref": f"#/components/schemas/{model.__name__}"}
    if array_too:
        item_ref = schema["properties"]["operations"]["items"]
        ref = {"oneOf": [ref, {"type": "array", "items": item_ref}]}
    return {"requestBody": {"required": required, "content": {"application/json": {"schema": ref}}}}
