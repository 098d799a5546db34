"""The OpenAPI 3.0 description of the HTTP+JSON 1.0 binding, as served (docs/openapi.yaml).

Generated, never edited by hand. The paths and methods are FastAPI's description of the
functions' apps (`get_openapi` over the binding's routers); the rest is written here, because
those routes read their bodies, query and A2A-Version themselves and return ready responses,
so FastAPI's own operations would say only "any JSON, or a 422 validation error" (an answer
the binding never gives: bindings/rest.py). The request and response schemas come from the
pydantic models the binding validates and renders with (`model_json_schema(by_alias=True)`).
`tests/unit/test_openapi.py` fails when the committed file differs from this script's output,
validates it as OpenAPI 3.0 and compares its routes with template.yaml's Api events.

OpenAPI 3.0 (not 3.1) because API Gateway imports 3.0; pydantic writes JSON Schema 2020-12,
so `anyOf: [X, {type: null}]` becomes `nullable`, and `const` becomes a one-value `enum`.

Usage: .venv/bin/python scripts/openapi.py > docs/openapi.yaml
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from a2a_serverless import __version__
from a2a_serverless.models import a2a

REF = "#/components/schemas/{model}"
A2A_JSON = "application/a2a+json"
JSON = "application/json"
EVENT_STREAM = "text/event-stream"

# Request bodies as the binding validates them; responses as `A2AModel.wire()` renders them.
MODELS: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (a2a.SendMessageRequest, "validation"),
    (a2a.TaskPushNotificationConfig, "validation"),
    (a2a.AgentCard, "serialization"),
    (a2a.SendMessageResponse, "serialization"),
    (a2a.StreamResponse, "serialization"),
    (a2a.Task, "serialization"),
    (a2a.ListTasksResponse, "serialization"),
    (a2a.ListTaskPushNotificationConfigsResponse, "serialization"),
    (a2a.TaskPushNotificationConfig, "serialization"),
]

# google.rpc.Status as the binding writes it (bindings/rest.py `status_body`).
STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A google.rpc.Status error (spec §11.6): `code` is the HTTP status.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "status", "message"],
            "properties": {
                "code": {"type": "integer"},
                "status": {"type": "string", "example": "INVALID_ARGUMENT"},
                "message": {"type": "string"},
                "details": {
                    "type": "array",
                    "description": "google.rpc.ErrorInfo (domain `a2a-protocol.org`, `reason`) "
                    "and google.rpc.BadRequest (`fieldViolations` naming each refused field).",
                    "items": {
                        "type": "object",
                        "required": ["@type"],
                        "properties": {"@type": {"type": "string"}},
                        "additionalProperties": True,
                    },
                },
            },
        }
    },
}

SECURITY_SCHEMES: dict[str, Any] = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "Auth=ApiKey (the default): a key from `scripts/auth create-key`.",
    },
    "Bearer": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "Auth=Jwt: a JWT from the OIDC issuer the stack trusts (RS256/ES256).",
    },
    "SigV4": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "Auth=Iam: an AWS SigV4 signature (service `execute-api`).",
        "x-amazon-apigateway-authtype": "awsSigv4",
    },
}

SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {
            "type": "string",
            "description": "One StreamResponse (components/schemas/StreamResponse) as JSON.",
        },
        "event": {"type": "string"},
        "id": {"type": "string"},
    },
}

DESCRIPTION = """\
The HTTP+JSON 1.0 binding of an a2a-serverless agent (A2A protocol 1.0, spec §11).

- Every operation but the public Agent Card needs the header `A2A-Version: 1.0` (spec §3.6).
- Request bodies are JSON (`application/a2a+json` or `application/json`); answers are
  `application/a2a+json` unless `Accept` rules it out. Field names are camelCase, enums are
  their names (`TASK_STATE_COMPLETED`), empty and default fields are omitted.
- A `Part` sets exactly one of `text`, `raw` (base64), `url`, `data`.
- Every error is a google.rpc.Status body whose `code` is the HTTP status.
- Input limits (see the README's Limits): 256 KiB bodies, 32 levels of nesting (16 inside any
  `metadata` or `data`), finite numbers only, valid Unicode only.
- A deployed stack authenticates every route but the Agent Card with the scheme its `Auth`
  parameter picks (one of the security schemes below); the local stack is open by default.
- The JSON-RPC bindings (1.0 and 0.3) share `POST /` and are not described here.
"""


def _openapi30(node: Any) -> Any:
    """JSON Schema 2020-12 (pydantic's) as an OpenAPI 3.0 Schema Object."""
    if isinstance(node, list):
        return [_openapi30(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: v for k, v in node.items() if k != "title"}  # "Messageid": noise
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and {"type": "null"} in any_of:
        rest = [s for s in any_of if s != {"type": "null"}]
        del node["anyOf"]
        if len(rest) == 1 and "$ref" not in rest[0]:
            node = {**rest[0], **node}
        else:  # a $ref ignores its siblings in 3.0: wrap it
            node["allOf" if len(rest) == 1 else "anyOf"] = rest
        node["nullable"] = True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if node == {"default": None}:  # `Any`: every JSON value, null included
        node = {"nullable": True, "default": None}
    return {
        key: (value if key in ("enum", "default", "example") else _openapi30(value))
        for key, value in node.items()
    }


PART_CONTENT = ("text", "raw", "url", "data")


def _one_content(part: dict[str, Any]) -> dict[str, Any]:
    """A Part sets exactly one of its content fields (the model's validator, which JSON
    Schema from pydantic cannot show): a `oneOf` of each one required. `data` may be JSON
    null and still counts as set; the others are absent, never null."""
    properties = dict(part["properties"])
    for name in PART_CONTENT[:3]:
        properties[name] = {"type": "string"}
    properties["raw"]["format"] = "byte"  # base64
    return {
        **part,
        "properties": properties,
        "oneOf": [{"required": [name]} for name in PART_CONTENT],
    }


def _schemas() -> tuple[dict[str, Any], dict[tuple[str, str], str]]:
    """The components' schemas, and the component name of each (model, mode)."""
    refs, defs = models_json_schema(MODELS, by_alias=True, ref_template=REF)
    names: dict[tuple[str, str], str] = {
        (model.__name__, mode): ref["$ref"].rsplit("/", 1)[1] for (model, mode), ref in refs.items()
    }
    found = defs["$defs"]
    for name, schema in found.items():
        # A model with a wrap serializer (Part keeps `data: null`) declares only "an object"
        # when serialized; its wire shape is the one it validates.
        twin = name.removesuffix("-Output") + "-Input"
        if name.endswith("-Output") and twin in found and "properties" not in schema:
            found[name] = found[twin]
    schemas = {name: _openapi30(schema) for name, schema in sorted(found.items())}
    for name in ("Part-Input", "Part-Output"):
        schemas[name] = _one_content(schemas[name])
    schemas["Status"] = STATUS_SCHEMA
    return schemas, names


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {A2A_JSON: {"schema": schema}, JSON: {"schema": schema}}


def _ok(description: str, name: str) -> dict[str, Any]:
    return {"description": description, "content": _json_content(_ref(name))}


def _errors(*codes: int) -> dict[str, Any]:
    """Error responses: the statuses an operation answers itself, then any other."""
    text = {
        400: "Invalid request or parameters (the fields are named in `details`)",
        401: "No or bad credentials (`WWW-Authenticate` names the scheme)",
        404: "No such task or config, or not the caller's",
        409: "The task's state forbids the operation",
        413: "The body is larger than 256 KiB",
        415: "The body is not JSON",
    }
    status = {"$ref": "#/components/responses/Status"}
    answers: dict[str, Any] = {
        str(code): {"description": text[code], "content": _json_content(_ref("Status"))}
        for code in codes
    }
    answers["default"] = status
    return answers


def _stream(description: str) -> dict[str, Any]:
    return {
        "description": description
        + " Each event is one `data:` line holding a StreamResponse (components/schemas/"
        "StreamResponse) and a blank line; `:` comment lines are heartbeats. The stream ends "
        "after a terminal or interrupted task state.",
        # One event of the stream (as OpenAPI 3.2's itemSchema reads it).
        "content": {EVENT_STREAM: {"schema": SSE_EVENT_SCHEMA}},
    }


def _body(name: str) -> dict[str, Any]:
    return {"required": True, "content": _json_content(_ref(name))}


def _param(name: str, where: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    param: dict[str, Any] = {
        "name": name,
        "in": where,
        "schema": schema,
        "description": description,
    }
    if where == "path":
        param["required"] = True
    return param


def _operation(
    operation_id: str,
    summary: str,
    parameters: list[dict[str, Any]],
    ok: dict[str, Any],
    errors: tuple[int, ...],
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One operation: `ok` is its 200 response, `errors` the statuses it answers itself."""
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "parameters": parameters,
    }
    if body is not None:
        operation["requestBody"] = body
    operation["responses"] = {"200": ok, **_errors(*errors)}
    return operation


def _paths(names: dict[tuple[str, str], str]) -> dict[str, Any]:
    def out(model: type[BaseModel]) -> str:
        return names[(model.__name__, "serialization")]

    def inp(model: type[BaseModel]) -> str:
        return names[(model.__name__, "validation")]

    version = {"$ref": "#/components/parameters/A2AVersion"}
    task_id = {"$ref": "#/components/parameters/TaskId"}
    config_id = _param("configId", "path", {"type": "string"}, "The push config's id.")
    history = _param(
        "historyLength",
        "query",
        {"type": "integer", "minimum": 0},
        "At most this many of the latest messages in `history` (0: none; absent: all).",
    )
    list_params = [
        version,
        _param("contextId", "query", {"type": "string"}, "Only tasks of this context."),
        _param("status", "query", _ref("TaskState"), "Only tasks in this state."),
        _param(
            "pageSize",
            "query",
            {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
            "Tasks per page.",
        ),
        _param("pageToken", "query", {"type": "string"}, "`nextPageToken` of the last page."),
        history,
        _param(
            "statusTimestampAfter",
            "query",
            {"type": "string", "format": "date-time"},
            "Only tasks whose status time is at or after this instant (RFC 3339).",
        ),
        _param("includeArtifacts", "query", {"type": "boolean"}, "List each task's artifacts too."),
    ]
    paths: dict[str, Any] = {
        "/.well-known/agent-card.json": {
            "get": {
                "operationId": "GetAgentCard",
                "summary": "The public Agent Card (cacheable: ETag, Last-Modified)",
                "security": [],
                "responses": {
                    "200": _ok("The Agent Card", out(a2a.AgentCard)),
                    "304": {"description": "Not modified (If-None-Match / If-Modified-Since)"},
                },
            }
        },
        "/.well-known/jwks.json": {
            "get": {
                "operationId": "GetAgentCardJwks",
                "summary": "The public key of the Agent Card's signatures (their `jku`)",
                "security": [],
                "responses": {
                    "200": {
                        "description": "A JSON Web Key Set (RFC 7517) of one ES256 key",
                        "content": {"application/jwk-set+json": {"schema": {"type": "object"}}},
                    },
                    "404": {"description": "The card is not signed (no CardSigningKeyArn)"},
                },
            }
        },
    }
    deleted = {
        "description": "Deleted (an empty object)",
        "content": _json_content({"type": "object", "maxProperties": 0}),
    }
    # path, method: operationId, summary, parameters, 200 response, its own error statuses,
    # request body
    operations: dict[tuple[str, str], tuple[Any, ...]] = {
        ("/extendedAgentCard", "get"): (
            "GetExtendedAgentCard",
            "The extended Agent Card of an authenticated caller",
            [version],
            _ok("The extended Agent Card", out(a2a.AgentCard)),
            (400, 401),
        ),
        ("/message:send", "post"): (
            "SendMessage",
            "Send a message; answers the task (or a message) when it settles, "
            "or at once with `configuration.returnImmediately`",
            [version],
            _ok("The task or message", out(a2a.SendMessageResponse)),
            (400, 404, 413, 415),
            _body(inp(a2a.SendMessageRequest)),
        ),
        ("/message:stream", "post"): (
            "SendStreamingMessage",
            "Send a message and stream the task's events (Server-Sent Events)",
            [version],
            _stream("The task, then its status and artifact updates."),
            (400, 404, 413, 415),
            _body(inp(a2a.SendMessageRequest)),
        ),
        ("/tasks", "get"): (
            "ListTasks",
            "The caller's tasks, newest status first, page by page",
            list_params,
            _ok("One page of tasks", out(a2a.ListTasksResponse)),
            (400,),
        ),
        ("/tasks/{id}", "get"): (
            "GetTask",
            "One task: status, artifacts and history",
            [version, task_id, history],
            _ok("The task", out(a2a.Task)),
            (400, 404),
        ),
        ("/tasks/{id}:cancel", "post"): (
            "CancelTask",
            "Cancel a task that has not settled (of a body, only `tenant` is read)",
            [version, task_id],
            _ok("The canceled task", out(a2a.Task)),
            (404, 409),
        ),
        ("/tasks/{id}:subscribe", "post"): (
            "SubscribeToTask",
            "Stream the events of a task that has not ended (Server-Sent Events)",
            [version, task_id],
            _stream("The task as it is now, then its updates."),
            (404, 409),
        ),
        # The proto's HTTP rule for SubscribeToTask is this GET; POST is served too.
        ("/tasks/{id}:subscribe", "get"): (
            "SubscribeToTaskByGet",
            "SubscribeToTask by the proto's GET rule: the same stream as the POST",
            [version, task_id],
            _stream("The task as it is now, then its updates."),
            (404, 409),
        ),
        ("/tasks/{id}/pushNotificationConfigs", "post"): (
            "CreateTaskPushNotificationConfig",
            "Register a webhook for the task's updates",
            [version, task_id],
            _ok("The config, with its id", out(a2a.TaskPushNotificationConfig)),
            (400, 404, 413, 415),
            _body(inp(a2a.TaskPushNotificationConfig)),
        ),
        ("/tasks/{id}/pushNotificationConfigs", "get"): (
            "ListTaskPushNotificationConfigs",
            "The task's webhooks",
            [version, task_id],
            _ok("The configs", out(a2a.ListTaskPushNotificationConfigsResponse)),
            (400, 404),
        ),
        ("/tasks/{id}/pushNotificationConfigs/{configId}", "get"): (
            "GetTaskPushNotificationConfig",
            "One of the task's webhooks",
            [version, task_id, config_id],
            _ok("The config", out(a2a.TaskPushNotificationConfig)),
            (400, 404),
        ),
        ("/tasks/{id}/pushNotificationConfigs/{configId}", "delete"): (
            "DeleteTaskPushNotificationConfig",
            "Remove one of the task's webhooks",
            [version, task_id, config_id],
            deleted,
            (400, 404),
        ),
    }
    for (path, method), operation in operations.items():
        paths.setdefault(path, {})[method] = _operation(*operation)
    return paths


# FastAPI's path parameter names -> the proto's (the ones the document uses).
PATH_PARAMETERS = {"{task_id}": "{id}", "{config_id}": "{configId}"}


def served_routes() -> dict[str, list[str]]:
    """The HTTP+JSON routes of the functions' apps as FastAPI describes them: path (with the
    proto's parameter names) -> methods, without the `/{tenant}` forms and the `/tasks/`
    spelling (the gateway's `/tasks` resource)."""
    from fastapi.openapi.utils import get_openapi

    from a2a_serverless.bindings import rest

    unused: Any = None  # the routers only keep their services for the requests
    app = rest.create_app(
        rest.card_router(unused),
        rest.send_router(unused),
        rest.stream_router(unused),
        rest.list_tasks_router(unused),
        rest.get_task_router(unused),
        rest.task_action_router(unused),
        rest.push_router(unused),
    )
    described = get_openapi(title="routes", version=__version__, routes=app.routes)["paths"]
    routes: dict[str, list[str]] = {}
    for path, item in described.items():
        for fastapi_name, name in PATH_PARAMETERS.items():
            path = path.replace(fastapi_name, name)
        if not path.startswith("/{tenant}/") and path != "/tasks/":
            routes[path] = list(item)
    return routes


def _served_paths(names: dict[tuple[str, str], str]) -> dict[str, Any]:
    """FastAPI's paths and methods, each with the operation written here."""
    written = _paths(names)
    served = served_routes()
    unwritten = sorted(
        f"{method.upper()} {path}"
        for path, methods in served.items()
        for method in methods
        if method not in written.get(path, {})
    )
    unserved = sorted(
        f"{method.upper()} {path}"
        for path, item in written.items()
        for method in item
        if method not in served.get(path, [])
    )
    if unwritten or unserved:
        raise SystemExit(f"operations not written: {unwritten}; written, not served: {unserved}")
    return {path: {m: written[path][m] for m in methods} for path, methods in served.items()}


def _with_400(responses: dict[str, Any]) -> dict[str, Any]:
    """`responses` with a 400 (before `default`): a tenant that is no path segment, or too
    long for its principal, is refused so under any operation."""
    if "400" in responses:
        return responses
    statuses = {k: v for k, v in responses.items() if k != "default"}
    return (
        statuses
        | {k: v for k, v in _errors(400).items() if k == "400"}
        | {"default": responses["default"]}
    )


def _with_tenant_paths(paths: dict[str, Any]) -> dict[str, Any]:
    """Every operation also under `/{tenant}` (the proto's additional_bindings); the card
    and its keys have no tenant form."""
    tenant = {"$ref": "#/components/parameters/Tenant"}
    scoped = {
        "/{tenant}" + path: {
            method: copy.deepcopy(operation)  # no YAML aliases to the plain operation
            | {
                "operationId": operation["operationId"] + "InTenant",
                "parameters": [tenant, *operation.get("parameters", [])],
                "responses": _with_400(operation["responses"]),
            }
            for method, operation in item.items()
        }
        for path, item in paths.items()
        if not path.startswith("/.well-known/")
    }
    return paths | scoped


def build() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    schemas, names = _schemas()
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "a2a-serverless HTTP+JSON binding",
            "version": __version__,
            "description": DESCRIPTION,
            "license": {"name": "Apache-2.0"},
        },
        "servers": [
            {
                "url": "https://{restApiId}.execute-api.{region}.amazonaws.com/{stage}",
                "description": "A deployed stack (its `ApiUrl` output)",
                "variables": {
                    "restApiId": {"default": "abc123"},
                    "region": {"default": "us-east-1"},
                    "stage": {"default": "prod"},
                },
            },
            {"url": "http://127.0.0.1:8000", "description": "The local stack (`scripts/dev`)"},
        ],
        "security": [{"ApiKey": []}, {"Bearer": []}, {"SigV4": []}],
        "paths": _with_tenant_paths(_served_paths(names)),
        "components": {
            "parameters": {
                "A2AVersion": _param(
                    "A2A-Version",
                    "header",
                    {"type": "string", "enum": ["1.0"]},
                    "The A2A protocol version of the request (spec §3.6); absent means 0.3, "
                    "which this binding does not serve.",
                )
                | {"required": True},
                "TaskId": _param("id", "path", {"type": "string"}, "The task's id."),
                "Tenant": _param(
                    "tenant",
                    "path",
                    {"type": "string", "pattern": "^[A-Za-z0-9._~-]{1,64}$"},
                    "The tenant (the card's `supportedInterfaces[].tenant`): tasks are the "
                    "caller's under it; a body's `tenant`, if given, must be the same.",
                ),
            },
            "responses": {
                "Status": {
                    "description": "An error (google.rpc.Status)",
                    "content": _json_content(_ref("Status")),
                }
            },
            "securitySchemes": SECURITY_SCHEMES,
            "schemas": schemas,
        },
    }


def render() -> str:
    """docs/openapi.yaml's text."""
    header = "# Generated by scripts/openapi.py from the models; do not edit by hand.\n"
    return header + yaml.safe_dump(build(), sort_keys=False, allow_unicode=True, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
