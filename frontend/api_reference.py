"""The browsable API reference: drf-spectacular's OpenAPI schema laid out for a page, grouped by tag.

The schema is generated once per language and process (it changes only with the code); summaries and tag
labels come from pypto_web/api_docs.py, field descriptions from the serializers' help texts.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.utils import translation
from django.utils.translation import gettext as _

METHOD_ORDER = ("get", "post", "put", "patch", "delete")
MAX_DEPTH = 3  # nested inline objects shown this deep; named schemas are links to their own section
REF_PREFIX = "#/components/schemas/"


@lru_cache(maxsize=4)
def schema_for_language(language: str) -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    with translation.override(language):
        return SchemaGenerator().get_schema(request=None, public=True)


def type_label(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"text": "integer", "ref": None}`` or ``{"text": "Profile[]", "ref": "Profile"}`` for one schema."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(REF_PREFIX)
        return {"text": name, "ref": name}
    if schema.get("allOf") and len(schema["allOf"]) == 1:
        return type_label(schema["allOf"][0])
    if schema.get("type") == "array":
        inner = type_label(schema.get("items") or {})
        return {"text": inner["text"] + "[]", "ref": inner["ref"]}
    kind = schema.get("type") or ("enum" if "enum" in schema else "any")
    if schema.get("format") == "binary":
        return {"text": "binary", "ref": None}
    fmt = schema.get("format")
    return {"text": f"{kind}<{fmt}>" if fmt else str(kind), "ref": None}


def fields_of(schema: dict[str, Any], depth: int = 0) -> list[dict[str, Any]]:
    """The properties of an object schema as rows (name, type, required, read-only, enum, description)."""
    required = set(schema.get("required") or [])
    rows = []
    for name, prop in (schema.get("properties") or {}).items():
        enum = prop.get("enum") or []
        if prop.get("allOf") and "$ref" in prop["allOf"][0]:
            enum = []  # an enum component: its values are listed in its own section
        rows.append({
            "name": name, "type": type_label(prop), "required": name in required,
            "read_only": bool(prop.get("readOnly")), "write_only": bool(prop.get("writeOnly")),
            "nullable": bool(prop.get("nullable")), "enum": [e for e in enum if e not in ("", None)],
            # enum descriptions are drf-spectacular's English list of choices: the values say it already
            "description": "" if enum else (prop.get("description") or ""),
            "children": fields_of(prop, depth + 1) if depth < MAX_DEPTH and prop.get("properties") else [],
        })
    return rows


def body_of(content: dict[str, Any]) -> list[dict[str, Any]]:
    """Request or response content: one row per media type, with its type and (inline objects) fields."""
    out = []
    for media, spec in (content or {}).items():
        schema = spec.get("schema") or {}
        free = schema.get("type") == "object" and not schema.get("properties")
        out.append({"media": media, "type": type_label(schema), "free_form": free,
                    "fields": fields_of(schema) if schema.get("properties") else []})
    return out


def _collapse_forms(body: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """DRF accepts JSON, form and multipart alike for most
    bodies: show the type once, list the media types."""
    if len(body) > 1 and len({(b["type"]["text"], b["free_form"]) for b in body}) == 1:
        first = dict(body[0])
        first["media"] = ", ".join(b["media"] for b in body)
        return [first]
    return body


def operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every operation as a row for the page, in path order within each tag."""
    rows = []
    for path, ops in (schema.get("paths") or {}).items():
        for method in METHOD_ORDER:
            op = ops.get(method)
            if op is None:
                continue
            request = op.get("requestBody") or {}
            rows.append({
                "id": op.get("operationId", ""), "method": method.upper(), "path": path,
                "tag": (op.get("tags") or ["other"])[0], "summary": op.get("summary") or "",
                "auth": [next(iter(s)) for s in op.get("security") or [] if s],  # security scheme names
                "parameters": [{
                    "name": p["name"], "where": p["in"], "required": bool(p.get("required")),
                    "type": type_label(p.get("schema") or {}),
                    "enum": (p.get("schema") or {}).get("enum") or [],
                    "description": p.get("description") or "",
                } for p in op.get("parameters") or []],
                "request": _collapse_forms(body_of(request.get("content") or {})),
                "request_required": bool(request.get("required")),
                "responses": [{"code": code, "body": body_of(r.get("content") or {})}
                              for code, r in sorted((op.get("responses") or {}).items())],
            })
    return rows


def reference(language: str) -> dict[str, Any]:
    """The page's context: operations grouped by tag (labels translated) and the named schemas."""
    schema = schema_for_language(language)
    labels = {t["name"]: t.get("description") or t["name"] for t in schema.get("tags") or []}
    groups: dict[str, list[dict[str, Any]]] = {}
    for op in operations(schema):
        groups.setdefault(op["tag"], []).append(op)
    components = (schema.get("components") or {}).get("schemas") or {}
    schemas = [{"name": name, "enum": spec.get("enum") if "enum" in spec else None, "fields": fields_of(spec),
                "free_form": spec.get("type") == "object" and not spec.get("properties")}
               for name, spec in sorted(components.items())]
    return {
        "title": schema.get("info", {}).get("title", "API"), "version": schema.get("info", {}).get("version"),
        "groups": [{"tag": tag, "label": labels.get(tag, tag), "operations": ops}
                   for tag, ops in sorted(groups.items(), key=lambda kv: _tag_rank(kv[0]))],
        "schemas": schemas, "operation_count": sum(len(v) for v in groups.values()),
        "auth_labels": {"cookieAuth": _("session cookie"), "tokenAuth": "Authorization: Token",
                        "agentToken": "Authorization: Agent"},
    }


# Tags in the order a newcomer needs them; the rest alphabetically after.
_TAG_ORDER = ("auth", "projects", "uploads", "profiles", "findings", "artifacts", "comparisons",
              "invitations", "captures", "agents", "agent")


def _tag_rank(tag: str) -> tuple[int, str]:
    return (_TAG_ORDER.index(tag) if tag in _TAG_ORDER else len(_TAG_ORDER), tag)
