"""The contract between API Gateway's streamed Lambda proxy integration and the Lambda Web
Adapter, pinned on the template and on the responses the streamed functions write.

API Gateway invokes the function with InvokeWithResponseStream and expects a JSON metadata
prelude (statusCode, headers, multiValueHeaders, cookies), 8 NUL bytes, then the payload; it
forwards nothing before the delimiter. The adapter (AWS_LWA_INVOKE_MODE=response_stream) never
writes that frame itself: lambda_http's streaming runner turns the app's HTTP response head
into the prelude (status, every header, Set-Cookie moved to `cookies`, Content-Type defaulted
to application/octet-stream) and then copies the body chunk by chunk. docs/deploy.md ("The
streaming path on AWS") has the whole account and its sources.
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fastapi import APIRouter
from starlette.responses import JSONResponse

from a2a_serverless.bindings.keepalive import KeepAliveResponse
from a2a_serverless.bindings.rest import create_app
from a2a_serverless.bindings.sse import sse_response
from a2a_serverless.core.errors import TaskNotFoundError
from a2a_serverless.settings import Settings, get_settings
from tests.asgi_client import AsgiClient
from tests.template.sam import access_log_setting, load_sam, resources_of_type, translate

# Source: API Gateway developer guide, "Stream the integration response for your proxy
# integrations" (response-transfer-mode.html): streams are cut after this long without a byte.
IDLE_TIMEOUT_SECONDS = {"REGIONAL": 300, "PRIVATE": 300, "EDGE": 30}
# Source: "Troubleshoot issues with response streaming in API Gateway"
# (response-streaming-troubleshoot.html): the access-log variables of a streamed response.
STREAMING_LOG_VARIABLES = (
    "$context.integration.responseTransferMode",  # BUFFERED or STREAMED
    "$context.integration.timeToAllHeaders",
    "$context.integration.timeToFirstContent",
)
ORIGIN = "https://app.example"


def _streamed_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Function logical id -> properties, for every function under the adapter's stream mode."""
    return {
        name: resource["Properties"]
        for name, resource in template["Resources"].items()
        if resource["Type"] in ("AWS::Serverless::Function", "AWS::Lambda::Function")
        and (resource["Properties"].get("Environment") or {})
        .get("Variables", {})
        .get("AWS_LWA_INVOKE_MODE")
        == "response_stream"
    }


def _access_log_format(cfn: dict[str, Any]) -> str:
    return str(access_log_setting(cfn)["Format"])  # as deployed with ApiAccessLogs=true


def test_access_log_records_how_each_response_was_transferred(cfn: dict[str, Any]) -> None:
    # After a deploy, the access log shows whether a route really streamed (STREAMED) and
    # when its first byte came: what the first `smoke --long` run is checked against.
    log_format = _access_log_format(cfn)
    for variable in STREAMING_LOG_VARIABLES:
        assert f'"{variable}"' in log_format, variable


def test_streamed_functions_never_compress(cfn: dict[str, Any]) -> None:
    # Sources: API Gateway, response-transfer-mode.html ("content encoding" is not supported on
    # a streamed response); the adapter's src/lib.rs (v1.0.0) turns AWS_LWA_ENABLE_COMPRESSION
    # off under response_stream, with a warning only.
    functions = _streamed_functions(cfn)
    assert set(functions) == {"SendMessageFunction", "StreamFunction", "GetTaskFunction"}
    for name, props in functions.items():
        env = props["Environment"]["Variables"]
        assert str(env.get("AWS_LWA_ENABLE_COMPRESSION", "false")).lower() == "false", name


def test_detector_sees_a_streamed_function_asking_for_compression() -> None:
    sam = load_sam()
    env = sam["Resources"]["StreamFunction"]["Properties"]["Environment"]["Variables"]
    env["AWS_LWA_ENABLE_COMPRESSION"] = "true"
    with pytest.raises(AssertionError):
        test_streamed_functions_never_compress(translate(sam))


def _keepalive_seconds(env: dict[str, Any]) -> float:
    """The longest a streamed function stays silent: the SSE heartbeat and the blocking
    send's keep-alive, as the function's environment (else the settings' defaults) sets them."""
    fields = Settings.model_fields
    heartbeat = env.get("STREAM_HEARTBEAT_SECONDS", fields["stream_heartbeat_seconds"].default)
    keepalive = env.get("BLOCKING_KEEPALIVE_SECONDS", fields["blocking_keepalive_seconds"].default)
    return max(float(heartbeat), float(keepalive))


def test_streams_speak_before_the_endpoints_idle_timeout(cfn: dict[str, Any]) -> None:
    # Source: response-transfer-mode.html: 5 minutes idle on Regional and private endpoints,
    # 30 s on edge-optimized ones. A blocking send writes nothing until its task settles and a
    # subscription nothing while the task is quiet: both must write something sooner.
    (api,) = resources_of_type(cfn, "AWS::ApiGateway::RestApi").values()
    (endpoint,) = api["Properties"]["EndpointConfiguration"]["Types"]
    limit = IDLE_TIMEOUT_SECONDS[endpoint]
    for name, props in _streamed_functions(cfn).items():
        assert _keepalive_seconds(props["Environment"]["Variables"]) < limit, name


def test_detector_sees_an_edge_endpoint_with_a_slow_heartbeat() -> None:
    sam = load_sam()
    sam["Resources"]["Api"]["Properties"]["EndpointConfiguration"]["Type"] = "EDGE"
    env = sam["Resources"]["GetTaskFunction"]["Properties"]["Environment"]["Variables"]
    env["STREAM_HEARTBEAT_SECONDS"] = "45"
    with pytest.raises(AssertionError):
        test_streams_speak_before_the_endpoints_idle_timeout(translate(sam))


# -- the prelude the adapter makes of a response head -----------------------------------------


def prelude_problems(status: int, headers: list[tuple[str, str]]) -> list[str]:
    """What stops a response head from becoming a prelude API Gateway documents.

    Source: lambda-http/src/streaming.rs and lambda-runtime/src/requests.rs
    (awslabs/aws-lambda-rust-runtime, used by the adapter): `statusCode` is the status,
    `headers` the header map (a name sent twice becomes a JSON array there: http-serde's
    header_map), Set-Cookie values go to `cookies`, and a missing Content-Type becomes
    application/octet-stream. API Gateway's format (response-transfer-mode-lambda.html) has
    arrays only under `multiValueHeaders`.
    """
    problems = []
    if not 100 <= status <= 599:
        problems.append(f"status {status}")
    names = Counter(name.lower() for name, _ in headers if name.lower() != "set-cookie")
    problems += [f"{name} sent {n} times" for name, n in names.items() if n > 1]
    if "content-type" not in names:
        problems.append("no content-type: the client would get application/octet-stream")
    if "content-encoding" in names:
        problems.append("content-encoding on a streamed response")
    return problems


def test_prelude_check_sees_what_the_gateway_would_not_take() -> None:
    assert prelude_problems(200, [("Content-Type", "text/event-stream")]) == []
    cookies = [("content-type", "a/b"), ("set-cookie", "a=1"), ("set-cookie", "b=2")]
    assert prelude_problems(200, cookies) == []
    assert prelude_problems(200, []) != []
    assert prelude_problems(200, [("content-type", "a/b"), ("Vary", "x"), ("vary", "y")]) != []
    assert prelude_problems(200, [("content-type", "a/b"), ("content-encoding", "gzip")]) != []


def _streamed_router() -> APIRouter:
    """The streamed response kinds of the functions: an SSE stream, a blocking send's keep-alive
    response (before and after its first keep-alive byte) and an error answer."""
    router = APIRouter()

    @router.get("/stream")
    async def stream() -> object:
        async def frames() -> AsyncIterator[bytes]:
            yield b"data: one\n\n"

        return sse_response(frames())

    def blocking(delay: float) -> KeepAliveResponse:
        async def answer() -> JSONResponse:
            await asyncio.sleep(delay)
            return JSONResponse({"done": True}, headers={"A2A-Version": "1.0"})

        return KeepAliveResponse(
            answer,
            lambda exc: JSONResponse({"error": str(exc)}, status_code=500),
            media_type="application/json",
            interval=0.05,
        )

    @router.get("/blocking-quick")
    async def blocking_quick() -> object:
        return blocking(0)

    @router.get("/blocking-slow")
    async def blocking_slow() -> object:
        return blocking(0.15)  # past the keep-alive interval: the head goes out first

    @router.get("/error")
    async def error() -> JSONResponse:
        raise TaskNotFoundError(task_id="t-1")

    return router


@pytest.fixture(params=["", ORIGIN], ids=["no-cors", "cors"])
def cors(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CORS_ALLOW_ORIGINS", request.param)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.usefixtures("cors")
@pytest.mark.parametrize("path", ["/stream", "/blocking-quick", "/blocking-slow", "/error"])
def test_streamed_responses_make_a_prelude_the_gateway_takes(path: str) -> None:
    response = AsgiClient(create_app(_streamed_router())).get(path, headers={"Origin": ORIGIN})
    head = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]
    assert prelude_problems(response.status_code, head) == [], head
    if path == "/stream":
        assert response.headers["content-type"].startswith("text/event-stream")


def test_the_templates_stream_functions_are_the_ones_checked(sam: dict[str, Any]) -> None:
    # The three functions answer through these response kinds (bindings/sse.py,
    # bindings/keepalive.py, the error mapping); a fourth streamed function needs a look here.
    assert set(_streamed_functions(copy.deepcopy(sam))) == {
        "SendMessageFunction",
        "StreamFunction",
        "GetTaskFunction",
    }
