"""Timeouts in proportion, read generically from the translated template.

- A buffered route's function must give up before API Gateway's 29 s (else the client gets a
  gateway 504 while the function keeps running).
- A streamed route's function may run at most Lambda's 900 s, and its route must hold the
  stream at least that long.
- A queue feeding a function must hide a received batch for at least 6 x the function timeout
  (+ the batching window), Lambda's guidance for SQS event sources, or a batch still being
  retried becomes visible and is processed twice.
- What a function holds a connection for (blocking wait, stream length) stays below its timeout.
"""

from __future__ import annotations

from typing import Any

from tests.template.sam import (
    BUFFERED,
    BUFFERED_TIMEOUT_MS,
    STREAM,
    function_routes,
    load_sam,
    resources_of_type,
    route_timeout_ms,
    transfer_mode,
    translate,
)

LAMBDA_MAX_TIMEOUT = 900
SQS_VISIBILITY_FACTOR = 6
SQS_DEFAULT_VISIBILITY = 30


def _timeout(cfn: dict[str, Any], function: str) -> int:
    return int(cfn["Resources"][function]["Properties"]["Timeout"])


def _functions_by_mode(cfn: dict[str, Any], mode: str) -> set[str]:
    return {
        function
        for function, found in function_routes(cfn).items()
        if any(transfer_mode(integration) == mode for integration in found.values())
    }


def _queue_mappings(cfn: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(function, queue logical id, mapping properties) for every SQS event source."""
    queues = resources_of_type(cfn, "AWS::SQS::Queue")
    found = []
    for mapping in resources_of_type(cfn, "AWS::Lambda::EventSourceMapping").values():
        props = mapping["Properties"]
        source = props["EventSourceArn"]
        if isinstance(source, dict) and "Fn::GetAtt" in source:
            queue, attribute = source["Fn::GetAtt"]
            if queue in queues and attribute == "Arn":
                found.append((props["FunctionName"]["Ref"], queue, props))
    return found


def _visibility_problems(cfn: dict[str, Any]) -> list[str]:
    problems = []
    for function, queue, mapping in _queue_mappings(cfn):
        queue_props = cfn["Resources"][queue]["Properties"]
        visibility = int(queue_props.get("VisibilityTimeout", SQS_DEFAULT_VISIBILITY))
        window = int(mapping.get("MaximumBatchingWindowInSeconds", 0))
        needed = SQS_VISIBILITY_FACTOR * _timeout(cfn, function) + window
        if visibility < needed:
            problems.append(f"{queue} hides batches {visibility} s; {function} needs {needed} s")
    return problems


def test_buffered_api_functions_time_out_before_the_gateway(cfn: dict[str, Any]) -> None:
    buffered = _functions_by_mode(cfn, BUFFERED)
    assert buffered == {
        "AgentCardFunction",
        "ListTasksFunction",
        "PushConfigFunction",
        "DelegationReceiverFunction",
    }
    assert not buffered & _functions_by_mode(cfn, STREAM)
    for function in buffered:
        assert _timeout(cfn, function) * 1000 < BUFFERED_TIMEOUT_MS, function


def test_streaming_functions_fit_lambda_and_their_routes(cfn: dict[str, Any]) -> None:
    streaming = _functions_by_mode(cfn, STREAM)
    assert streaming == {"SendMessageFunction", "StreamFunction", "GetTaskFunction"}
    for function in streaming:
        timeout = _timeout(cfn, function)
        assert timeout <= LAMBDA_MAX_TIMEOUT, function
        for route, integration in function_routes(cfn)[function].items():
            assert route_timeout_ms(integration) >= timeout * 1000, (function, route)


def test_queues_hide_batches_six_times_the_function_timeout(cfn: dict[str, Any]) -> None:
    mappings = _queue_mappings(cfn)
    assert [(f, q) for f, q, _ in mappings] == [("WebhookSenderFunction", "PushRetryQueue")]
    assert _visibility_problems(cfn) == []


def test_detector_catches_a_short_visibility_timeout() -> None:
    sam = load_sam()
    sam["Resources"]["PushRetryQueue"]["Properties"]["VisibilityTimeout"] = 120  # 2 x 60 s
    assert _visibility_problems(translate(sam)) == [
        "PushRetryQueue hides batches 120 s; WebhookSenderFunction needs 360 s"
    ]


def test_detector_catches_a_buffered_function_outliving_the_gateway() -> None:
    sam = load_sam()
    sam["Globals"]["Function"]["Timeout"] = 30
    cfn = translate(sam)
    assert [f for f in _functions_by_mode(cfn, BUFFERED) if _timeout(cfn, f) * 1000 >= 29_000]


def test_held_connections_end_before_the_function_does(cfn: dict[str, Any]) -> None:
    wait = cfn["Parameters"]["BlockingMaxWaitSeconds"]
    send_timeout = _timeout(cfn, "SendMessageFunction")
    # Blocking sends keep the connection alive, so they may wait as long as the function lives.
    assert int(wait["Default"]) == int(wait["MaxValue"]) == 840
    assert int(wait["MaxValue"]) < send_timeout
    env = cfn["Resources"]["SendMessageFunction"]["Properties"]["Environment"]["Variables"]
    assert env["BLOCKING_MAX_WAIT_SECONDS"] == {"Ref": "BlockingMaxWaitSeconds"}
    stream = cfn["Resources"]["StreamFunction"]["Properties"]
    assert int(stream["Environment"]["Variables"]["STREAM_MAX_SECONDS"]) == 840
    assert int(stream["Environment"]["Variables"]["STREAM_MAX_SECONDS"]) < stream["Timeout"]
