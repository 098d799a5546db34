"""What API Gateway does before a protected method's integration runs, for the local gateway.

Read from the resolved `Api` resource: each method's `security` (REQUEST authorizer, api_key,
awsSigv4) and the `GatewayResponses`. The authorizer is the real function, run in a worker
thread, its policy cached per identity source for `authorizerResultTtlInSeconds`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from a2a_serverless.local.sigv4 import IamUsers, MissingSignature, SignatureError, verify

logger = logging.getLogger(__name__)

# API Gateway's own status per response type, where the template does not set one.
DEFAULT_STATUS = {
    "ACCESS_DENIED": 403,
    "API_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_FAILURE": 500,
    "BAD_REQUEST_PARAMETERS": 400,
    "BAD_REQUEST_BODY": 400,
    "EXPIRED_TOKEN": 403,
    "INTEGRATION_FAILURE": 504,
    "INTEGRATION_TIMEOUT": 504,
    "INVALID_API_KEY": 403,
    "INVALID_SIGNATURE": 403,
    "MISSING_AUTHENTICATION_TOKEN": 403,
    "QUOTA_EXCEEDED": 429,
    "REQUEST_TOO_LARGE": 413,
    "RESOURCE_NOT_FOUND": 404,
    "THROTTLED": 429,
    "UNAUTHORIZED": 401,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "WAF_FILTERED": 403,
}
# API Gateway's messages ($context.error.message) for the answers emulated here.
UNAUTHORIZED_MESSAGE = "Unauthorized"
DENIED_MESSAGE = "User is not authorized to access this resource"
EXPLICIT_DENY_MESSAGE = "User is not authorized to access this resource with an explicit deny"
FORBIDDEN_MESSAGE = "Forbidden"
AUTHORIZER_FAILURE_MESSAGE = "Internal server error"


class GatewayError(Exception):
    """A request API Gateway answers itself with the gateway response of `response_type`."""

    def __init__(self, response_type: str, message: str) -> None:
        super().__init__(f"{response_type}: {message}")
        self.response_type = response_type
        self.message = message


@dataclass(frozen=True)
class RenderedResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class _ResponseSpec:
    status: int | None
    templates: dict[str, str]
    headers: dict[str, str]  # header name -> mapping expression ('static' or method.request...)


class GatewayResponses:
    """The API's gateway responses, rendered as API Gateway renders them: the ones written in
    the DefinitionBody (`x-amazon-apigateway-gateway-responses`, API Gateway's form) with the
    `GatewayResponses` property (SAM's form: StatusCode, ResponseTemplates,
    ResponseParameters.Headers) over them, as SAM merges the two."""

    def __init__(
        self,
        responses: Mapping[str, Any] | None,
        definition_responses: Mapping[str, Any] | None = None,
    ) -> None:
        self.specs: dict[str, _ResponseSpec] = {}
        for response_type, raw in (definition_responses or {}).items():
            prefix = "gatewayresponse.header."
            self.specs[response_type] = _ResponseSpec(
                int(raw["statusCode"]) if raw.get("statusCode") else None,
                dict(raw.get("responseTemplates") or {}),
                {
                    name[len(prefix) :]: str(value)
                    for name, value in (raw.get("responseParameters") or {}).items()
                    if name.startswith(prefix)
                },
            )
        for response_type, raw in (responses or {}).items():
            self.specs[response_type] = _ResponseSpec(
                int(raw["StatusCode"]) if raw.get("StatusCode") else None,
                dict(raw.get("ResponseTemplates") or {}),
                {
                    name: str(value)
                    for name, value in (
                        (raw.get("ResponseParameters") or {}).get("Headers") or {}
                    ).items()
                },
            )

    def render(
        self,
        response_type: str,
        message: str,
        *,
        request_id: str = "",
        request_headers: Mapping[str, str] | None = None,
    ) -> RenderedResponse:
        default_status = DEFAULT_STATUS.get(response_type, 400)
        own = self.specs.get(response_type)
        fallback = self.specs.get("DEFAULT_4XX" if default_status < 500 else "DEFAULT_5XX")
        # A type without its own entry is answered as the class's default (its status too,
        # when the default pins one); a type with its own entry keeps its own status.
        spec = own or fallback or _ResponseSpec(None, {}, {})
        status = spec.status or default_status
        template = spec.templates.get("application/json")
        if template is None:
            template = '{"message":$context.error.messageString}'
        variables = {
            "$context.error.messageString": json.dumps(message),
            "$context.error.message": message,
            "$context.error.responseType": response_type,
            "$context.requestId": request_id,
        }
        # Longest names first: messageString before message.
        for name in sorted(variables, key=len, reverse=True):
            template = template.replace(name, variables[name])
        headers = [("content-type", "application/json")]
        lowered = {k.lower(): v for k, v in (request_headers or {}).items()}
        for name, value in spec.headers.items():
            rendered = _header_value(value, lowered)
            if rendered is not None:
                headers.append((name, rendered))
        return RenderedResponse(status, headers, template.encode())


def _header_value(value: str, request_headers: Mapping[str, str]) -> str | None:
    """A gateway response header mapping: a static 'value', or a request header's value."""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    prefix = "method.request.header."
    if value.startswith(prefix):
        return request_headers.get(value[len(prefix) :].lower())
    return None


# -- security of a method ------------------------------------------------------------------


@dataclass(frozen=True)
class CustomAuthorizer:
    """A Lambda authorizer (`x-amazon-apigateway-authorizer`) of a security scheme."""

    name: str
    type: str  # "request" (the only one emulated) or "token"
    identity_sources: tuple[str, ...]
    uri: str
    ttl_seconds: int


@dataclass(frozen=True)
class MethodSecurity:
    authorizer: CustomAuthorizer | None = None
    api_key_required: bool = False
    sigv4: bool = False

    @property
    def open(self) -> bool:
        return self.authorizer is None and not self.api_key_required and not self.sigv4


def _schemes(definition: Mapping[str, Any]) -> dict[str, Any]:
    components = definition.get("components") or {}
    return {
        **(definition.get("securityDefinitions") or {}),  # Swagger 2.0
        **(components.get("securitySchemes") or {}),  # OpenAPI 3
    }


def method_security(definition: Mapping[str, Any], resource: str, method: str) -> MethodSecurity:
    """The security of `method` on `resource` in a resolved DefinitionBody."""
    operation = ((definition.get("paths") or {}).get(resource) or {}).get(method.lower()) or {}
    requirements = operation.get("security", definition.get("security")) or []
    schemes = _schemes(definition)
    authorizer: CustomAuthorizer | None = None
    api_key = sigv4 = False
    for requirement in requirements:
        for name in requirement or {}:
            scheme = schemes.get(name)
            if not isinstance(scheme, dict):
                raise ValueError(f"security names {name}, which securitySchemes does not define")
            auth_type = str(scheme.get("x-amazon-apigateway-authtype", "")).lower()
            custom = scheme.get("x-amazon-apigateway-authorizer")
            if auth_type == "awssigv4":
                sigv4 = True
            elif isinstance(custom, dict):
                sources = str(custom.get("identitySource") or "")
                authorizer = CustomAuthorizer(
                    name=name,
                    type=str(custom.get("type", "token")).lower(),
                    identity_sources=tuple(s.strip() for s in sources.split(",") if s.strip()),
                    uri=str(custom.get("authorizerUri", "")),
                    ttl_seconds=int(custom.get("authorizerResultTtlInSeconds", 300)),
                )
            elif scheme.get("type") == "apiKey" and str(scheme.get("name")).lower() == "x-api-key":
                api_key = True
            else:
                raise ValueError(f"security scheme {name} is not one the local gateway emulates")
    return MethodSecurity(authorizer, api_key, sigv4)


# -- policies ------------------------------------------------------------------------------


def _wildcard(pattern: str) -> re.Pattern[str]:
    """An IAM resource/action pattern (`*` any run, `?` one character)."""
    return re.compile(
        "^"
        + "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
        + "$",
        re.DOTALL,
    )


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _action_matches(actions: Any) -> bool:
    return any(
        isinstance(a, str) and _wildcard(a.lower()).match("execute-api:invoke")
        for a in _as_list(actions)
    )


def _resource_matches(resources: Any, method_arn: str) -> bool:
    return any(isinstance(r, str) and _wildcard(r).match(method_arn) for r in _as_list(resources))


def policy_decision(policy: Any, method_arn: str) -> str:
    """'allow', 'deny' (an explicit Deny matches) or 'none' (nothing allows it) for the
    method ARN; ValueError for a document API Gateway could not read."""
    if not isinstance(policy, dict):
        raise ValueError("policyDocument is not an object")
    statements = policy.get("Statement")
    if statements is None:
        raise ValueError("policyDocument has no Statement")
    allowed = False
    for statement in _as_list(statements):
        if not isinstance(statement, dict):
            raise ValueError("a policy statement is not an object")
        effect = statement.get("Effect")
        if effect not in ("Allow", "Deny"):
            raise ValueError(f"policy statement Effect {effect!r}")
        if not _action_matches(statement.get("Action")):
            continue
        if not _resource_matches(statement.get("Resource"), method_arn):
            continue
        if effect == "Deny":
            return "deny"
        allowed = True
    return "allow" if allowed else "none"


def _checked_result(result: Any) -> dict[str, Any]:
    """An authorizer's answer as API Gateway accepts it; ValueError if it would not."""
    if not isinstance(result, dict):
        raise ValueError(f"authorizer returned {type(result).__name__}, not an object")
    principal = result.get("principalId")
    if not isinstance(principal, str) or not principal:
        raise ValueError("authorizer result has no principalId")
    context = result.get("context") or {}
    if not isinstance(context, dict):
        raise ValueError("authorizer context is not an object")
    for key, value in context.items():
        # API Gateway passes only primitive context values; an object or array fails.
        if not isinstance(value, str | int | float | bool):
            raise ValueError(f"authorizer context value {key} is not a string/number/boolean")
    usage_key = result.get("usageIdentifierKey")
    if usage_key is not None and not isinstance(usage_key, str):
        raise ValueError("usageIdentifierKey is not a string")
    policy_decision(result.get("policyDocument"), "arn:aws:execute-api:check")
    return result


# -- usage plan (API keys) -------------------------------------------------------------------


class LocalUsagePlan:
    """The ApiKey mode's usage plan: API Gateway API keys (id, value) it contains, and a
    request counter per key. Implements auth's UsageKeys for ApiKeyAdmin.

    Throttling (ApiKeyRateLimit/BurstLimit) and quotas are not emulated: the counter shows
    what a key used."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}  # usage key id -> value
        self._counts: dict[str, int] = {}  # value -> requests
        self._lock = threading.Lock()

    def create(self, name: str) -> tuple[str, str]:
        import secrets

        key_id = secrets.token_hex(5)
        value = secrets.token_urlsafe(30)[:40]
        with self._lock:
            self._values[key_id] = value
        return key_id, value

    def delete(self, usage_key_id: str) -> None:
        with self._lock:
            value = self._values.pop(usage_key_id, None)
            if value is not None:
                self._counts.pop(value, None)

    def admit(self, value: str) -> bool:
        """Count a request made with the key `value`; False if the plan has no such key."""
        with self._lock:
            if value not in self._values.values():
                return False
            self._counts[value] = self._counts.get(value, 0) + 1
            return True

    def requests(self, usage_key_id: str) -> int:
        with self._lock:
            value = self._values.get(usage_key_id)
            return self._counts.get(value, 0) if value is not None else 0


# -- the checks ------------------------------------------------------------------------------


@dataclass
class ReceivedRequest:
    """What the local gateway received, as the checks need it."""

    method: str
    path: str
    raw_path: str
    resource: str
    query_string: str
    headers: list[tuple[str, str]]
    source_ip: str
    stage: str
    path_parameters: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), None)

    def query(self) -> list[tuple[str, str]]:
        from urllib.parse import parse_qsl

        return parse_qsl(self.query_string, keep_blank_values=True)


@dataclass
class Admitted:
    """What the checks add to the request context of an admitted request."""

    authorizer: dict[str, Any] | None = None
    identity: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(eq=False)
class Guard:
    """API Gateway's checks of one API: authorizer (cached), API key, SigV4."""

    definition: Mapping[str, Any]
    _: KW_ONLY
    region: str
    account: str
    api_id: str
    handler_for_uri: Callable[[str], tuple[Handler, Any]]
    usage_plan: LocalUsagePlan | None = None
    iam_users: IamUsers | None = None
    clock: Callable[[], float] = time.monotonic
    authorizer_calls: int = field(default=0, init=False)
    _cache: dict[tuple[str, tuple[str, ...]], tuple[float, dict[str, Any]]] = field(
        default_factory=dict, init=False, repr=False
    )

    def security(self, resource: str, method: str) -> MethodSecurity:
        return method_security(self.definition, resource, method)

    def method_arn(self, request: ReceivedRequest) -> str:
        return (
            f"arn:aws:execute-api:{self.region}:{self.account}:{self.api_id}/"
            f"{request.stage}/{request.method}{request.path}"
        )

    async def check(self, request: ReceivedRequest) -> Admitted:
        """The request context additions of an admitted request; GatewayError otherwise."""
        security = self.security(request.resource, request.method)
        admitted = Admitted()
        if security.sigv4:
            admitted.identity.update(self._check_sigv4(request))
        usage_key: str | None = None
        if security.authorizer is not None:
            result = await self._authorize(security.authorizer, request)
            context = result.get("context") or {}
            admitted.authorizer = {**context, "principalId": result["principalId"]}
            usage_key = result.get("usageIdentifierKey")
        if security.api_key_required:
            # Key source AUTHORIZER: the key is the authorizer's usageIdentifierKey; no key,
            # or one the usage plan does not hold, is INVALID_API_KEY ("Forbidden"), checked
            # on every request, a cached answer's too: a revoked key's usage-plan key is gone.
            if not usage_key or self.usage_plan is None or not self.usage_plan.admit(usage_key):
                raise GatewayError("INVALID_API_KEY", FORBIDDEN_MESSAGE)
            admitted.identity["apiKey"] = usage_key
        return admitted

    # -- SigV4 ---------------------------------------------------------------------------

    def _check_sigv4(self, request: ReceivedRequest) -> dict[str, Any]:
        users = self.iam_users or IamUsers(self.account)
        try:
            user = verify(
                method=request.method,
                host=request.header("host") or "localhost",
                raw_path=request.raw_path,
                query_string=request.query_string,
                headers=request.headers,
                body=request.body,
                users=users,
                region=self.region,
            )
        except MissingSignature as exc:
            raise GatewayError("MISSING_AUTHENTICATION_TOKEN", str(exc)) from exc
        except SignatureError as exc:
            raise GatewayError("INVALID_SIGNATURE", str(exc)) from exc
        return {
            "userArn": user.arn,
            "caller": user.user_id,
            "user": user.user_id,
            "accountId": user.account,
            "accessKey": user.access_key_id,
        }

    # -- Lambda authorizer ---------------------------------------------------------------

    def _identity(self, authorizer: CustomAuthorizer, request: ReceivedRequest) -> tuple[str, ...]:
        values = []
        query = dict(request.query())
        for source in authorizer.identity_sources:
            value: str | None = None
            if source.startswith("method.request.header."):
                value = request.header(source.removeprefix("method.request.header."))
            elif source.startswith("method.request.querystring."):
                value = query.get(source.removeprefix("method.request.querystring."))
            if not value or not value.strip():
                # API Gateway answers 401 without invoking the authorizer.
                raise GatewayError("UNAUTHORIZED", UNAUTHORIZED_MESSAGE)
            values.append(value)
        return tuple(values)

    def request_event(self, request: ReceivedRequest) -> dict[str, Any]:
        """API Gateway's REQUEST authorizer event for the request."""
        headers: dict[str, str] = {}
        multi_headers: dict[str, list[str]] = {}
        for name, value in request.headers:
            headers[name] = value
            multi_headers.setdefault(name, []).append(value)
        query: dict[str, str] = {}
        multi_query: dict[str, list[str]] = {}
        for name, value in request.query():
            query[name] = value
            multi_query.setdefault(name, []).append(value)
        return {
            "type": "REQUEST",
            "methodArn": self.method_arn(request),
            "resource": request.resource,
            "path": request.path,
            "httpMethod": request.method,
            "headers": headers,
            "multiValueHeaders": multi_headers,
            "queryStringParameters": query,
            "multiValueQueryStringParameters": multi_query,
            "pathParameters": dict(request.path_parameters),
            "stageVariables": {},
            "requestContext": {
                "resourcePath": request.resource,
                "httpMethod": request.method,
                "path": f"/{request.stage}{request.path}",
                "accountId": self.account,
                "apiId": self.api_id,
                "stage": request.stage,
                "requestId": request.request_id,
                "identity": {"sourceIp": request.source_ip},
            },
        }

    async def _authorize(
        self, authorizer: CustomAuthorizer, request: ReceivedRequest
    ) -> dict[str, Any]:
        identity = self._identity(authorizer, request)
        method_arn = self.method_arn(request)
        key = (authorizer.name, identity)
        cached = self._cache.get(key)
        now = self.clock()
        if cached is not None and cached[0] > now:
            result = cached[1]
        else:
            self._cache.pop(key, None)
            result = await self._invoke(authorizer, request)
            if authorizer.ttl_seconds > 0:
                self._cache[key] = (now + authorizer.ttl_seconds, result)
        # A cached policy is evaluated against each request's method ARN, as API Gateway does.
        decision = policy_decision(result["policyDocument"], method_arn)
        if decision == "deny":
            raise GatewayError("ACCESS_DENIED", EXPLICIT_DENY_MESSAGE)
        if decision != "allow":
            raise GatewayError("ACCESS_DENIED", DENIED_MESSAGE)
        return result

    async def _invoke(
        self, authorizer: CustomAuthorizer, request: ReceivedRequest
    ) -> dict[str, Any]:
        if authorizer.type != "request":
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR", AUTHORIZER_FAILURE_MESSAGE)
        handler, context = self.handler_for_uri(authorizer.uri)
        event = self.request_event(request)
        self.authorizer_calls += 1
        try:
            # A worker thread: the authorizer may call this very server (the local issuer's
            # JWKS), which must keep serving meanwhile.
            result = await asyncio.to_thread(handler, event, context)
        except Exception as exc:
            if str(exc) == "Unauthorized":
                raise GatewayError("UNAUTHORIZED", UNAUTHORIZED_MESSAGE) from exc
            logger.exception("local gateway: authorizer %s failed", authorizer.name)
            raise GatewayError("AUTHORIZER_FAILURE", AUTHORIZER_FAILURE_MESSAGE) from exc
        try:
            return _checked_result(result)
        except ValueError as exc:
            logger.error(
                "local gateway: authorizer %s answered malformed: %s", authorizer.name, exc
            )
            raise GatewayError("AUTHORIZER_FAILURE", AUTHORIZER_FAILURE_MESSAGE) from exc
