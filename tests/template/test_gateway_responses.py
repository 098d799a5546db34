"""Errors API Gateway answers itself have the google.rpc.Status JSON body of the functions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.template.sam import rest_api_body

# responseType -> (HTTP status, google.rpc status name)
EXPECTED = {
    "MISSING_AUTHENTICATION_TOKEN": (404, "NOT_FOUND"),  # unknown path or method
    "THROTTLED": (429, "RESOURCE_EXHAUSTED"),
    "REQUEST_TOO_LARGE": (413, "INVALID_ARGUMENT"),
    "UNSUPPORTED_MEDIA_TYPE": (415, "INVALID_ARGUMENT"),
    "INTEGRATION_TIMEOUT": (504, "DEADLINE_EXCEEDED"),
    "DEFAULT_4XX": (400, "INVALID_ARGUMENT"),
    "DEFAULT_5XX": (500, "INTERNAL"),
}


def _responses(cfn: dict[str, Any]) -> dict[str, Any]:
    return rest_api_body(cfn)["x-amazon-apigateway-gateway-responses"]


def _render(template: str, message: str = "Gateway said no") -> Any:
    # Gateway response templates are not VTL: API Gateway only substitutes $context variables;
    # messageString is the message as a quoted JSON string.
    assert "#" not in template and "$input" not in template
    rendered = template.replace("$context.error.messageString", json.dumps(message))
    assert "$" not in rendered, f"unsubstituted variable in {template}"
    return json.loads(rendered)


def test_the_gateway_response_set(cfn: dict[str, Any]) -> None:
    assert set(_responses(cfn)) == set(EXPECTED)


@pytest.mark.parametrize("response_type", sorted(EXPECTED))
def test_status_shaped_json_body(cfn: dict[str, Any], response_type: str) -> None:
    response = _responses(cfn)[response_type]
    code, status = EXPECTED[response_type]
    assert response["statusCode"] == str(code)
    assert list(response["responseTemplates"]) == ["application/json"]
    body = _render(response["responseTemplates"]["application/json"])
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "status", "message"}
    assert body["error"]["code"] == code  # always equals the HTTP status
    assert body["error"]["status"] == status
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_unknown_routes_are_404_not_found(cfn: dict[str, Any]) -> None:
    response = _responses(cfn)["MISSING_AUTHENTICATION_TOKEN"]
    body = _render(response["responseTemplates"]["application/json"])
    assert response["statusCode"] == "404"
    assert body == {
        "error": {"code": 404, "status": "NOT_FOUND", "message": "No operation at this path"}
    }


def test_render_rejects_a_broken_template() -> None:
    with pytest.raises(json.JSONDecodeError):
        _render('{"error":{"code":400,"message":"$context.error.messageString"}}')
    with pytest.raises(AssertionError):
        _render('{"error":{"code":400,"message":$context.error.message}}')
