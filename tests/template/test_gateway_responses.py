"""Errors API Gateway answers itself keep their status and have the functions' google.rpc.Status
JSON body."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.template.sam import resolve_ifs, rest_api_body

# responseType -> (HTTP status, google.rpc status name). The statuses are API Gateway's own for
# each type (supported-gateway-response-types), except the unknown route's 404 and the 401 of
# a credential the gateway refuses itself (its default is 403); the names are google.rpc's for
# the HTTP status (code.proto), INVALID_ARGUMENT for 413 and 415.
EXPECTED = {
    "MISSING_AUTHENTICATION_TOKEN": (404, "NOT_FOUND"),  # unknown path or method (not Iam)
    "RESOURCE_NOT_FOUND": (404, "NOT_FOUND"),
    "BAD_REQUEST_BODY": (400, "INVALID_ARGUMENT"),
    "BAD_REQUEST_PARAMETERS": (400, "INVALID_ARGUMENT"),
    "UNAUTHORIZED": (401, "UNAUTHENTICATED"),
    "ACCESS_DENIED": (403, "PERMISSION_DENIED"),
    "EXPIRED_TOKEN": (401, "UNAUTHENTICATED"),
    "INVALID_API_KEY": (401, "UNAUTHENTICATED"),
    "INVALID_SIGNATURE": (401, "UNAUTHENTICATED"),
    "WAF_FILTERED": (403, "PERMISSION_DENIED"),
    "REQUEST_TOO_LARGE": (413, "INVALID_ARGUMENT"),
    "UNSUPPORTED_MEDIA_TYPE": (415, "INVALID_ARGUMENT"),
    "THROTTLED": (429, "RESOURCE_EXHAUSTED"),
    "QUOTA_EXCEEDED": (429, "RESOURCE_EXHAUSTED"),
    "AUTHORIZER_FAILURE": (500, "INTERNAL"),
    "AUTHORIZER_CONFIGURATION_ERROR": (500, "INTERNAL"),
    "INTEGRATION_TIMEOUT": (504, "DEADLINE_EXCEEDED"),
}
# The fallbacks: no status of their own (a StatusCode would replace the status of every
# response of the class without an entry); the body's code is the class's.
FALLBACKS = {"DEFAULT_4XX": (400, "INVALID_ARGUMENT"), "DEFAULT_5XX": (500, "INTERNAL")}

# Sample values for the $context variables a gateway response template may use.
SAMPLE_CONTEXT = {
    "$context.error.messageString": json.dumps('Gateway said "no"'),
    "$context.error.message": 'Gateway said "no"',
    "$context.error.responseType": "THROTTLED",
    "$context.requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
}


def _responses(cfn: dict[str, Any], parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """The gateway responses as deployed with the parameters (defaults otherwise)."""
    return resolve_ifs(cfn, rest_api_body(cfn)["x-amazon-apigateway-gateway-responses"], parameters)


def _render(template: str) -> Any:
    # Gateway response templates are not VTL: API Gateway only substitutes variables;
    # messageString is the message as a quoted JSON string.
    assert "#" not in template and "$input" not in template
    rendered = template
    # Longest names first: $context.error.message is a prefix of messageString.
    for name in sorted(SAMPLE_CONTEXT, key=len, reverse=True):
        rendered = rendered.replace(name, SAMPLE_CONTEXT[name])
    assert "$" not in rendered, f"unsubstituted variable in {template}"
    return json.loads(rendered)


def _status_shaped(response: dict[str, Any], code: int, status: str) -> None:
    assert list(response["responseTemplates"]) == ["application/json"]
    body = _render(response["responseTemplates"]["application/json"])
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "status", "message"}
    assert body["error"]["code"] == code
    assert body["error"]["status"] == status
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_the_gateway_response_set(cfn: dict[str, Any]) -> None:
    assert set(_responses(cfn)) == set(EXPECTED) | set(FALLBACKS)


@pytest.mark.parametrize("response_type", sorted(EXPECTED))
def test_each_response_type_keeps_its_status(cfn: dict[str, Any], response_type: str) -> None:
    response = _responses(cfn)[response_type]
    code, status = EXPECTED[response_type]
    assert response["statusCode"] == str(code)
    _status_shaped(response, code, status)  # the body's code always equals the HTTP status


@pytest.mark.parametrize("response_type", sorted(FALLBACKS))
def test_the_fallbacks_pin_no_status(cfn: dict[str, Any], response_type: str) -> None:
    response = _responses(cfn)[response_type]
    assert "statusCode" not in response, (
        f"{response_type} with a statusCode turns every uncustomized response of its class "
        "(an authorizer's 401 or 403 too) into that status"
    )
    _status_shaped(response, *FALLBACKS[response_type])


# What API Gateway answers a missing, bad, expired or revoked credential with (a 401), and a
# caller it knows but does not allow (the one 403 of authentication).
CREDENTIAL_REFUSALS = ("UNAUTHORIZED", "EXPIRED_TOKEN", "INVALID_API_KEY", "INVALID_SIGNATURE")


def test_authentication_and_authorization_are_told_apart(cfn: dict[str, Any]) -> None:
    responses = _responses(cfn)
    assert {responses[t]["statusCode"] for t in CREDENTIAL_REFUSALS} == {"401"}
    assert responses["ACCESS_DENIED"]["statusCode"] == "403"


def test_unknown_routes_are_404_not_found(cfn: dict[str, Any]) -> None:
    response = _responses(cfn)["MISSING_AUTHENTICATION_TOKEN"]
    body = _render(response["responseTemplates"]["application/json"])
    assert response["statusCode"] == "404"
    assert body == {
        "error": {"code": 404, "status": "NOT_FOUND", "message": "No operation at this path"}
    }


def test_the_message_keeps_quotes_escaped(cfn: dict[str, Any]) -> None:
    body = _render(_responses(cfn)["THROTTLED"]["responseTemplates"]["application/json"])
    assert body["error"]["message"] == 'Gateway said "no"'


def test_render_rejects_a_broken_template() -> None:
    with pytest.raises(json.JSONDecodeError):
        _render('{"error":{"code":400,"message":"$context.error.messageString"}}')
    with pytest.raises(json.JSONDecodeError):
        _render('{"error":{"code":400,"message":$context.error.message}}')
    with pytest.raises(AssertionError):
        _render('{"error":{"code":$context.status,"message":$context.error.messageString}}')


# -- Authentication (the Auth parameter) -------------------------------------------------------

# Auth -> the WWW-Authenticate of a 401, as API Gateway sends it (the template's static value
# is quoted: 'value'). None: no authentication, so no 401 either.
CHALLENGES = {
    "ApiKey": 'ApiKey realm="a2a", header="X-API-Key"',
    "Jwt": 'Bearer realm="a2a"',
    "Iam": "AWS4-HMAC-SHA256",
    "None": None,
}


def _header(response: dict[str, Any], name: str) -> str | None:
    """A static header value of a gateway response, unquoted (None when it has none)."""
    value = response.get("responseParameters", {}).get(f"gatewayresponse.header.{name}")
    if value is None:
        return None
    assert isinstance(value, str), f"{name} is not a static value: {value!r}"
    assert len(value) >= 2 and value[0] == value[-1] == "'", f"{name} is not quoted: {value!r}"
    return value[1:-1]


@pytest.mark.parametrize("auth", sorted(CHALLENGES))
def test_unauthorized_is_401_and_names_the_scheme(cfn: dict[str, Any], auth: str) -> None:
    response = _responses(cfn, {"Auth": auth})["UNAUTHORIZED"]
    assert response["statusCode"] == "401"
    _status_shaped(response, 401, "UNAUTHENTICATED")
    assert _header(response, "WWW-Authenticate") == CHALLENGES[auth]
    assert set(response.get("responseParameters", {})) <= {
        "gatewayresponse.header.WWW-Authenticate"
    }


@pytest.mark.parametrize("response_type", CREDENTIAL_REFUSALS)
@pytest.mark.parametrize("auth", sorted(CHALLENGES))
def test_every_refused_credential_is_401_naming_the_scheme(
    cfn: dict[str, Any], auth: str, response_type: str
) -> None:
    # A bad or expired SigV4 signature (Iam), a revoked key whose cached authorizer answer
    # names a usage-plan key no longer in the plan (ApiKey): the challenge of the mode.
    response = _responses(cfn, {"Auth": auth})[response_type]
    assert response["statusCode"] == "401"
    _status_shaped(response, 401, "UNAUTHENTICATED")
    assert _header(response, "WWW-Authenticate") == CHALLENGES[auth]


@pytest.mark.parametrize("auth", ["ApiKey", "Jwt", "None"])
def test_without_iam_an_unknown_route_stays_404(cfn: dict[str, Any], auth: str) -> None:
    response = _responses(cfn, {"Auth": auth})["MISSING_AUTHENTICATION_TOKEN"]
    assert response["statusCode"] == "404"
    assert _header(response, "WWW-Authenticate") is None


def test_in_iam_mode_an_unsigned_request_is_401_with_the_sigv4_challenge(
    cfn: dict[str, Any],
) -> None:
    # API Gateway answers an AWS_IAM method without a signature, and an unknown route, with
    # MISSING_AUTHENTICATION_TOKEN; the two cannot be told apart, the message says both.
    response = _responses(cfn, {"Auth": "Iam"})["MISSING_AUTHENTICATION_TOKEN"]
    assert response["statusCode"] == "401"
    assert _header(response, "WWW-Authenticate") == "AWS4-HMAC-SHA256"
    body = _render(response["responseTemplates"]["application/json"])
    assert body == {
        "error": {
            "code": 401,
            "status": "UNAUTHENTICATED",
            "message": "Missing SigV4 signature or no operation at this path",
        }
    }


@pytest.mark.parametrize("auth", sorted(CHALLENGES))
def test_every_mode_keeps_the_other_statuses(cfn: dict[str, Any], auth: str) -> None:
    responses = _responses(cfn, {"Auth": auth})
    assert set(responses) == set(EXPECTED) | set(FALLBACKS)
    for response_type, (code, status) in EXPECTED.items():
        if response_type == "MISSING_AUTHENTICATION_TOKEN":
            continue
        assert responses[response_type]["statusCode"] == str(code), (auth, response_type)
        _status_shaped(responses[response_type], code, status)
    assert responses["ACCESS_DENIED"]["statusCode"] == "403"


def test_header_check_can_fail() -> None:
    with pytest.raises(AssertionError):
        _header({"responseParameters": {"gatewayresponse.header.X": "unquoted"}}, "X")
    with pytest.raises(AssertionError):
        _header({"responseParameters": {"gatewayresponse.header.X": {"Fn::If": []}}}, "X")
