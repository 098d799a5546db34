"""The streamed routes as AWS documents them, end to end: gateway integration, function, adapter.

API Gateway streams a Lambda proxy response only if the integration invokes
`InvokeWithResponseStream` (URI `.../2021-11-15/functions/<arn>/response-streaming-invocations`)
with `responseTransferMode: STREAM`; the integration timeout may then be raised to 15 minutes
(900000 ms), else the stream is cut at 29 s. The function answers through the Lambda Web Adapter
layer (`AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap`, `AWS_LWA_INVOKE_MODE=response_stream`).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.template.sam import (
    BUFFERED_TIMEOUT_MS,
    STREAM,
    STREAM_TIMEOUT_MS,
    load_sam,
    route_timeout_ms,
    routes,
    transfer_mode,
    translate,
)
from tests.template.test_routes import LONG_LIVED, ROUTES

STREAMING_URI = re.compile(
    r"arn:(?:aws|\$\{AWS::Partition\}):apigateway:\$\{AWS::Region\}:lambda:path/2021-11-15/"
    r"functions/\$\{(?P<function>\w+)\.Arn\}/response-streaming-invocations"
)
# The adapter layer as its README lists it (arm64, commercial regions); 26 is v1.0.0 (GA).
LWA_LAYER = {
    "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:753240598075:layer:"
    "LambdaAdapterLayerArm64:${LambdaWebAdapterLayerVersion}"
}
LWA_GA_VERSION = 26


@pytest.mark.parametrize("route", sorted(LONG_LIVED))
def test_streamed_route_is_configured_as_aws_documents(
    cfn: dict[str, Any], route: tuple[str, str]
) -> None:
    integration = routes(cfn)[route]
    assert integration["type"] == "aws_proxy"
    assert integration["httpMethod"] == "POST"  # Lambda is always invoked with POST
    match = STREAMING_URI.fullmatch(integration["uri"]["Fn::Sub"])
    assert match, integration["uri"]
    assert match["function"] == ROUTES[route]
    assert integration["responseTransferMode"] == "STREAM"
    assert integration["timeoutInMillis"] == STREAM_TIMEOUT_MS

    function = cfn["Resources"][match["function"]]["Properties"]
    env = function["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert LWA_LAYER in function["Layers"]
    assert function["Architectures"] == ["arm64"]  # the layer is the Arm64 build
    # The function may run as long as the gateway holds the stream, and no longer.
    assert function["Timeout"] * 1000 <= integration["timeoutInMillis"]


def test_buffered_routes_keep_the_29_second_default(cfn: dict[str, Any]) -> None:
    buffered = {route: i for route, i in routes(cfn).items() if route not in LONG_LIVED}
    assert buffered and len(buffered) == len(ROUTES) - len(LONG_LIVED)
    for route, integration in buffered.items():
        # Above 29 s a buffered integration needs a quota increase; nothing here needs it.
        assert "timeoutInMillis" not in integration, route
        assert route_timeout_ms(integration) == BUFFERED_TIMEOUT_MS


def test_web_adapter_layer_defaults_to_the_ga_release(cfn: dict[str, Any]) -> None:
    parameter = cfn["Parameters"]["LambdaWebAdapterLayerVersion"]
    assert parameter["Type"] == "Number"
    assert int(parameter["Default"]) == LWA_GA_VERSION


def test_detector_catches_a_stream_cut_at_29_seconds() -> None:
    sam = load_sam()
    event = sam["Resources"]["StreamFunction"]["Properties"]["Events"]["StreamMessage"]
    del event["Properties"]["TimeoutInMillis"]
    integration = routes(translate(sam))[("POST", "/message:stream")]
    assert transfer_mode(integration) == STREAM  # still streams, but only for 29 s
    assert route_timeout_ms(integration) == BUFFERED_TIMEOUT_MS != STREAM_TIMEOUT_MS


def test_samtranslator_keeps_the_15_minute_timeout(cfn: dict[str, Any]) -> None:
    # SAM passes TimeoutInMillis through unchecked; this pins that it reaches the integrations
    # of exactly the streamed routes (a buffered one above 29 s needs a quota increase).
    timeouts = {route: route_timeout_ms(i) for route, i in routes(cfn).items()}
    assert {r for r, ms in timeouts.items() if ms == STREAM_TIMEOUT_MS} == LONG_LIVED
