"""The local gateway's API Gateway checks: policy matching, gateway responses rendered from the
template, and the Lambda authorizer flow (cache, 401/403/500, API key) with a stand-in
authorizer handler (the real one is exercised end to end in tests/e2e/test_auth_modes.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.local.authorizers import (
    GatewayError,
    GatewayResponses,
    Guard,
    LocalUsagePlan,
    ReceivedRequest,
    policy_decision,
)
from a2a_serverless.local.template import Resolver, load_template, parameter_defaults

ROOT = Path(__file__).resolve().parents[2]
ARN = "arn:aws:execute-api:us-east-1:123456789012:local/prod/GET/tasks/abc"
AUTHORIZER_URI = "arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/arn:fn/invocations"


def allow(resource: Any, effect: str = "Allow", action: Any = "execute-api:Invoke") -> Any:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Action": action, "Effect": effect, "Resource": resource}],
    }


# -- policies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("arn:aws:execute-api:us-east-1:123456789012:local/prod/*/*", "allow"),
        ("arn:aws:execute-api:us-east-1:123456789012:local/prod/GET/tasks/*", "allow"),
        ("arn:aws:execute-api:us-east-1:123456789012:local/prod/GET/tasks/ab?", "allow"),
        ("arn:aws:execute-api:*", "allow"),
        (["arn:other", ARN], "allow"),
        ("arn:aws:execute-api:us-east-1:123456789012:local/prod/POST/*", "none"),
        ("arn:aws:execute-api:us-east-1:123456789012:local/test/*/*", "none"),
        ("arn:aws:execute-api:us-east-1:123456789012:local/prod/GET/tasks/ab", "none"),
        # Case matters, and regex characters in a resource are literal.
        ("ARN:aws:execute-api:us-east-1:123456789012:local/prod/*/*", "none"),
        ("arn:aws:execute-api:us-east-1:123456789012:local/prod/GET/tasks/a.c", "none"),
    ],
)
def test_resource_matching(resource: Any, expected: str) -> None:
    assert policy_decision(allow(resource), ARN) == expected


def test_explicit_deny_wins_and_other_actions_do_not_allow() -> None:
    policy = allow("*")
    policy["Statement"].append({"Action": "*", "Effect": "Deny", "Resource": ARN})
    assert policy_decision(policy, ARN) == "deny"
    assert policy_decision(allow("*", action="execute-api:*"), ARN) == "allow"
    assert policy_decision(allow("*", action="s3:GetObject"), ARN) == "none"
    assert policy_decision(allow("*", effect="Deny"), ARN) == "deny"


@pytest.mark.parametrize(
    "policy",
    [None, "x", {}, {"Statement": ["x"]}, {"Statement": [{"Effect": "Maybe", "Resource": "*"}]}],
)
def test_unreadable_policies_are_errors(policy: Any) -> None:
    with pytest.raises(ValueError):
        policy_decision(policy, ARN)


# -- gateway responses from the template -----------------------------------------------------


def template_responses(auth: str) -> GatewayResponses:
    template = load_template(ROOT / "template.yaml")
    r = Resolver(
        {**parameter_defaults(template), "Auth": auth},
        {},
        {"AuthorizerFunction.Arn": "arn:fn", "ApiAccessLogGroup.Arn": "arn:log"},
        template["Conditions"],
    )
    api = r.resolve(template["Resources"]["Api"]["Properties"])
    return GatewayResponses(
        api["GatewayResponses"],
        api["DefinitionBody"].get("x-amazon-apigateway-gateway-responses"),
    )


CHALLENGE = {
    "ApiKey": 'ApiKey realm="a2a", header="X-API-Key"',
    "Jwt": 'Bearer realm="a2a"',
    "Iam": "AWS4-HMAC-SHA256",
}


@pytest.mark.parametrize("auth", ["ApiKey", "Jwt", "Iam"])
def test_unauthorized_is_the_templates_401_with_its_challenge(auth: str) -> None:
    rendered = template_responses(auth).render("UNAUTHORIZED", 'Unauthorized "quoted"')
    assert rendered.status == 401
    headers = dict(rendered.headers)
    assert headers["WWW-Authenticate"] == CHALLENGE[auth]
    assert headers["content-type"] == "application/json"
    assert json.loads(rendered.body) == {
        "error": {"code": 401, "status": "UNAUTHENTICATED", "message": 'Unauthorized "quoted"'}
    }


@pytest.mark.parametrize(
    ("response_type", "status", "code"),
    [
        ("ACCESS_DENIED", 403, "PERMISSION_DENIED"),
        ("INVALID_API_KEY", 401, "UNAUTHENTICATED"),
        ("INVALID_SIGNATURE", 401, "UNAUTHENTICATED"),
        ("AUTHORIZER_FAILURE", 500, "INTERNAL"),
    ],
)
def test_other_answers_keep_their_status(response_type: str, status: int, code: str) -> None:
    rendered = template_responses("ApiKey").render(response_type, "m")
    assert rendered.status == status
    assert json.loads(rendered.body)["error"] == {"code": status, "status": code, "message": "m"}


def test_missing_authentication_token_is_401_in_iam_mode_and_404_otherwise() -> None:
    iam = template_responses("Iam").render("MISSING_AUTHENTICATION_TOKEN", "x")
    assert iam.status == 401
    assert dict(iam.headers)["WWW-Authenticate"] == "AWS4-HMAC-SHA256"
    assert template_responses("ApiKey").render("MISSING_AUTHENTICATION_TOKEN", "x").status == 404


def test_rendering_rules_without_the_template() -> None:
    responses = GatewayResponses(
        {
            "DEFAULT_4XX": {
                "ResponseTemplates": {"application/json": '{"t":"$context.error.responseType"}'},
                "ResponseParameters": {"Headers": {"X-Echo": "method.request.header.x-in"}},
            },
            "UNAUTHORIZED": {"StatusCode": 499},
        },
        {
            "ACCESS_DENIED": {
                "statusCode": "418",
                "responseParameters": {"gatewayresponse.header.A": "'b'"},
            }
        },
    )
    # A type without an entry takes the class default's template and headers, its own status.
    fallback = responses.render("INVALID_API_KEY", "m", request_headers={"X-In": "v"})
    assert (fallback.status, json.loads(fallback.body)) == (403, {"t": "INVALID_API_KEY"})
    assert ("X-Echo", "v") in fallback.headers
    # An entry's status wins; with no template, API Gateway's {"message": ...}.
    own = responses.render("UNAUTHORIZED", "m")
    assert (own.status, json.loads(own.body)) == (499, {"message": "m"})
    # API Gateway's form (DefinitionBody x-amazon-apigateway-gateway-responses).
    body_form = responses.render("ACCESS_DENIED", "m")
    assert body_form.status == 418 and ("A", "b") in body_form.headers


# -- the Lambda authorizer flow ----------------------------------------------------------------


DEFINITION = {
    "components": {
        "securitySchemes": {
            "A2AAuthorizer": {
                "type": "apiKey",
                "in": "header",
                "name": "X-API-Key",
                "x-amazon-apigateway-authtype": "custom",
                "x-amazon-apigateway-authorizer": {
                    "type": "request",
                    "identitySource": "method.request.header.X-API-Key",
                    "authorizerUri": AUTHORIZER_URI,
                    "authorizerResultTtlInSeconds": "60",
                },
            },
            "api_key": {"type": "apiKey", "name": "x-api-key", "in": "header"},
        }
    },
    "paths": {
        "/tasks/{id}": {"get": {"security": [{"A2AAuthorizer": []}]}},
        "/keyed": {"get": {"security": [{"A2AAuthorizer": []}, {"api_key": []}]}},
        "/open": {"get": {}},
    },
}


class StandIn:
    """A stand-in authorizer handler: answers what the test sets, records its events."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.answer: Any = None
        self.raises: Exception | None = None

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.events.append(event)
        if self.raises is not None:
            raise self.raises
        return self.answer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_guard(
    stand_in: StandIn, clock: Clock | None = None, ttl: str = "60", plan: Any = None
) -> Guard:
    definition = json.loads(json.dumps(DEFINITION))
    scheme = definition["components"]["securitySchemes"]["A2AAuthorizer"]
    scheme["x-amazon-apigateway-authorizer"]["authorizerResultTtlInSeconds"] = ttl
    uris: list[str] = []

    def handler_for_uri(uri: str) -> tuple[Any, Any]:
        uris.append(uri)
        assert uri.endswith("functions/arn:fn/invocations")
        return stand_in, None

    return Guard(
        definition,
        region="us-east-1",
        account="123456789012",
        api_id="local",
        handler_for_uri=handler_for_uri,
        usage_plan=plan,
        clock=clock or Clock(),
    )


def request(
    key: str | None = "k1", path: str = "/tasks/abc", resource: str = "/tasks/{id}"
) -> ReceivedRequest:
    headers = [("host", "localhost"), ("A2A-Version", "1.0")]
    if key is not None:
        headers.append(("X-Api-Key", key))
    return ReceivedRequest(
        method="GET",
        path=path,
        raw_path=path,
        resource=resource,
        query_string="a=1&a=2&b=",
        headers=headers,
        source_ip="10.0.0.1",
        stage="prod",
        path_parameters={"id": "abc"} if "{id}" in resource else {},
    )


def allowed(principal: str = "alice", **extra: Any) -> dict[str, Any]:
    return {
        "principalId": principal,
        "policyDocument": allow("arn:aws:execute-api:us-east-1:123456789012:local/prod/*/*"),
        "context": {"principal": principal, "scheme": "apiKey", "claims": "{}", "scopes": ""},
        **extra,
    }


async def test_allow_passes_the_context_and_the_event_is_api_gateways() -> None:
    stand_in = StandIn()
    stand_in.answer = allowed()
    admitted = await make_guard(stand_in).check(request())
    assert admitted.authorizer == {
        "principalId": "alice",
        "principal": "alice",
        "scheme": "apiKey",
        "claims": "{}",
        "scopes": "",
    }
    (event,) = stand_in.events
    assert event["type"] == "REQUEST"
    assert event["methodArn"] == ARN
    assert event["resource"] == "/tasks/{id}" and event["path"] == "/tasks/abc"
    assert event["httpMethod"] == "GET"
    assert event["headers"]["X-Api-Key"] == "k1"
    assert event["multiValueHeaders"]["X-Api-Key"] == ["k1"]
    assert event["queryStringParameters"] == {"a": "2", "b": ""}
    assert event["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": [""]}
    assert event["pathParameters"] == {"id": "abc"}
    assert event["requestContext"]["identity"]["sourceIp"] == "10.0.0.1"
    assert event["requestContext"]["stage"] == "prod"


@pytest.mark.parametrize("key", [None, "", "   "])
async def test_missing_identity_source_is_401_without_invoking(key: str | None) -> None:
    stand_in = StandIn()
    with pytest.raises(GatewayError) as caught:
        await make_guard(stand_in).check(request(key))
    assert caught.value.response_type == "UNAUTHORIZED"
    assert caught.value.message == "Unauthorized"
    assert stand_in.events == []


@pytest.mark.parametrize(
    ("raises", "answer", "response_type"),
    [
        (Exception("Unauthorized"), None, "UNAUTHORIZED"),
        (RuntimeError("boom"), None, "AUTHORIZER_FAILURE"),
        (Exception("unauthorized"), None, "AUTHORIZER_FAILURE"),
        (None, None, "AUTHORIZER_FAILURE"),
        (None, {"principalId": "a"}, "AUTHORIZER_FAILURE"),
        (None, {**allowed(), "principalId": ""}, "AUTHORIZER_FAILURE"),
        (None, {**allowed(), "context": {"claims": {"nested": 1}}}, "AUTHORIZER_FAILURE"),
        (
            None,
            {
                **allowed(),
                "policyDocument": {
                    "Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*"}]
                },
            },
            "ACCESS_DENIED",
        ),
        (
            None,
            {
                **allowed(),
                "policyDocument": allow(
                    "arn:aws:execute-api:us-east-1:123456789012:local/prod/POST/*"
                ),
            },
            "ACCESS_DENIED",
        ),
    ],
)
async def test_refusals(raises: Exception | None, answer: Any, response_type: str) -> None:
    stand_in = StandIn()
    stand_in.raises, stand_in.answer = raises, answer
    with pytest.raises(GatewayError) as caught:
        await make_guard(stand_in).check(request())
    assert caught.value.response_type == response_type


async def test_results_are_cached_per_credential_for_the_ttl() -> None:
    stand_in, clock = StandIn(), Clock()
    stand_in.answer = allowed()
    guard = make_guard(stand_in, clock, ttl="60")
    await guard.check(request("k1"))
    await guard.check(request("k1", path="/tasks/other"))
    assert len(stand_in.events) == 1  # cached, and the cached policy covers the other path
    await guard.check(request("k2"))
    assert len(stand_in.events) == 2  # another credential: its own call
    stand_in.raises = Exception("Unauthorized")  # e.g. the key was revoked
    clock.now += 59
    await guard.check(request("k1"))  # still the cached answer
    clock.now += 2
    with pytest.raises(GatewayError) as caught:
        await guard.check(request("k1"))
    assert caught.value.response_type == "UNAUTHORIZED"


async def test_cached_policy_is_evaluated_against_each_method_arn() -> None:
    stand_in = StandIn()
    stand_in.answer = {
        **allowed(),
        "policyDocument": allow(
            "arn:aws:execute-api:us-east-1:123456789012:local/prod/GET/tasks/abc"
        ),
    }
    guard = make_guard(stand_in)
    await guard.check(request("k1"))
    with pytest.raises(GatewayError) as caught:
        await guard.check(request("k1", path="/tasks/other"))
    assert caught.value.response_type == "ACCESS_DENIED"
    assert len(stand_in.events) == 1


async def test_ttl_zero_never_caches() -> None:
    stand_in = StandIn()
    stand_in.answer = allowed()
    guard = make_guard(stand_in, ttl="0")
    for _ in range(3):
        await guard.check(request("k1"))
    assert len(stand_in.events) == 3


async def test_api_key_required_checks_the_usage_plan() -> None:
    plan = LocalUsagePlan()
    usage_id, usage_value = plan.create("a2a-x")
    stand_in = StandIn()
    guard = make_guard(stand_in, ttl="0", plan=plan)
    keyed = request(path="/keyed", resource="/keyed")

    stand_in.answer = allowed()  # no usageIdentifierKey
    with pytest.raises(GatewayError) as caught:
        await guard.check(keyed)
    assert (caught.value.response_type, caught.value.message) == ("INVALID_API_KEY", "Forbidden")

    stand_in.answer = allowed(usageIdentifierKey="not-in-the-plan")
    with pytest.raises(GatewayError):
        await guard.check(keyed)

    stand_in.answer = allowed(usageIdentifierKey=usage_value)
    admitted = await guard.check(keyed)
    assert admitted.identity["apiKey"] == usage_value
    await guard.check(keyed)
    assert plan.requests(usage_id) == 2

    plan.delete(usage_id)  # revoked: out of the plan at once
    with pytest.raises(GatewayError):
        await guard.check(keyed)
    # A method without api_key in its security does not need a plan key.
    assert (await guard.check(request())).authorizer is not None


async def test_open_routes_are_not_checked() -> None:
    stand_in = StandIn()
    guard = make_guard(stand_in)
    admitted = await guard.check(request(None, path="/open", resource="/open"))
    assert admitted.authorizer is None and stand_in.events == []
