"""The input gate (bindings/http.py): one parser for every binding that refuses what
is not JSON (NaN, Infinity, out-of-range numbers), documents nested past the limits, and text
that is not valid Unicode; the safe renderer for values stored before the gate; and the model
validators that used to raise TypeError/OverflowError on hostile values."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from a2a_serverless.bindings.http import (
    NotJsonError,
    SafeJSONResponse,
    check_json,
    json_safe,
    loads,
)
from a2a_serverless.bindings.jsonrpc import CODECS, stream_frame
from a2a_serverless.bindings.sse import frame
from a2a_serverless.core.errors import InvalidParamsError
from a2a_serverless.models import (
    ListTasksRequest,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
    v03,
)
from a2a_serverless.settings import get_settings

MAX_DEPTH = get_settings().max_json_depth
MAX_VALUE_DEPTH = get_settings().max_value_depth


def nested(depth: int, key: str = "a") -> Any:
    """`depth` nested objects: depth 1 is {}."""
    value: Any = {}
    for _ in range(depth - 1):
        value = {key: value}
    return value


def violation(value: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(InvalidParamsError) as caught:
        check_json(value, **kwargs)
    assert len(caught.value.violations) == 1
    return caught.value.violations[0]


def test_the_defaults_are_documented_values() -> None:
    assert (MAX_DEPTH, MAX_VALUE_DEPTH) == (32, 16)


# -- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}', "[1e400]", "[-1e999]", '{"id": NaN}'],
)
def test_non_finite_numbers_are_not_json(text: str) -> None:
    with pytest.raises(NotJsonError):
        loads(text.encode())


def test_syntax_errors_and_bad_encodings_are_not_json() -> None:
    for body in (b"{", b'{"a":1,}', b"\xff\xfe\xfd", b"[" + b"1" * 5000 + b"]"):
        with pytest.raises(NotJsonError):
            loads(body)


def test_ordinary_numbers_still_parse() -> None:
    assert loads(b'{"a": 1.5, "b": -2e10, "c": 3}') == {"a": 1.5, "b": -2e10, "c": 3}


def test_a_document_too_deep_to_parse_is_a_violation_of_the_body() -> None:
    # Deeper than any Python's JSON parser goes (3.11 gives up near 1,000 levels; 3.13, the
    # Lambda runtime's, near 10,000-20,000, its C recursion limit).
    text = "[" * 200_000 + "]" * 200_000
    with pytest.raises(InvalidParamsError) as caught:
        loads(text.encode())
    assert caught.value.violations == [("(body)", f"is nested deeper than {MAX_DEPTH} levels")]


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_a_deep_document_is_refused_whether_the_parser_reads_it_or_not(opener: str) -> None:
    """3,000 levels: Python 3.11's parser gives up, `(body)`; 3.13's reads it and the depth
    check names the first value too deep. Either way one violation, the same reason."""
    closer = "]" if opener == "[" else "}"
    text = opener * 3000 + ("" if opener == "[" else "{}") + closer * 3000
    with pytest.raises(InvalidParamsError) as caught:
        check_json(loads(text.encode()))
    first_too_deep = "[0]" * MAX_DEPTH if opener == "[" else ".".join(["a"] * MAX_DEPTH)
    reason = f"is nested deeper than {MAX_DEPTH} levels"
    assert caught.value.violations in ([("(body)", reason)], [(first_too_deep, reason)])


# -- limits ------------------------------------------------------------------------------------


def test_document_depth_bound_is_inclusive() -> None:
    check_json(nested(MAX_DEPTH))
    field, why = violation(nested(MAX_DEPTH + 1))
    # The object at depth MAX_DEPTH + 1 is the value of the MAX_DEPTH-th key `a`.
    assert field == ".".join(["a"] * MAX_DEPTH)
    assert why == f"is nested deeper than {MAX_DEPTH} levels"


def test_base_depth_counts_the_levels_above() -> None:
    check_json(nested(MAX_DEPTH - 1), base_depth=1)
    violation(nested(MAX_DEPTH), base_depth=1)


def test_arrays_count_as_levels_and_name_their_index() -> None:
    value: Any = []
    for _ in range(MAX_DEPTH):
        value = [value]
    field, _ = violation({"parts": value})
    assert field.startswith("parts[0][0]")


@pytest.mark.parametrize("key", ["metadata", "data"])
def test_free_form_values_have_the_tighter_bound_and_name_their_root(key: str) -> None:
    check_json({"message": {key: nested(MAX_VALUE_DEPTH)}})
    field, why = violation({"message": {"parts": [{key: nested(MAX_VALUE_DEPTH + 1)}]}})
    assert (field, why) == (
        f"message.parts[0].{key}",
        f"is nested deeper than {MAX_VALUE_DEPTH} levels",
    )


def test_arrays_in_metadata_count_too() -> None:
    value: Any = []  # MAX_VALUE_DEPTH levels
    for _ in range(MAX_VALUE_DEPTH - 1):
        value = [value]
    check_json({"metadata": value})
    assert violation({"metadata": [value]})[0] == "metadata"


@pytest.mark.parametrize("text", ["\ud800", "ok\udfff", "\udc00\ud800"])
def test_lone_surrogates_in_values_name_the_field(text: str) -> None:
    assert violation({"message": {"messageId": text}}) == (
        "message.messageId",
        "is not valid Unicode text (lone surrogate)",
    )
    assert violation({"ids": ["fine", text]})[0] == "ids[1]"


def test_lone_surrogate_in_a_key_names_the_object() -> None:
    field, why = violation({"metadata": {"\ud800": 1}})
    assert field == "metadata" and "key" in why


def test_valid_non_ascii_text_passes() -> None:
    check_json({"text": "😀 é \U0010ffff", "\u00e9": ["日本"]})


def test_long_keys_are_cut_in_the_field_path() -> None:
    key = "k" * 10_000
    field, _ = violation({key: {"x": "\ud800"}})
    assert len(field) < 100 and field.endswith("....x")


def test_loads_then_check_catches_a_surrogate_escape() -> None:
    payload = loads(b'{"message": {"messageId": "\\ud800"}}')
    assert violation(payload)[0] == "message.messageId"


# -- rendering what was stored before the gate ----------------------------------------------------


def test_json_safe_replaces_what_strict_json_cannot_carry() -> None:
    value = {"n": float("nan"), "i": [float("inf"), 1.5], "s": "a\ud800b", "\udc00": True}
    assert json_safe(value) == {"n": None, "i": [None, 1.5], "s": "a\ufffdb", "\ufffd": True}
    assert json_safe(nested(200))  # deep values are cut, not a RecursionError
    json.dumps(json_safe(nested(200)), allow_nan=False)


def test_safe_response_renders_strict_json_or_a_sanitized_value() -> None:
    ordinary = SafeJSONResponse({"a": 1, "t": "é"})
    assert json.loads(ordinary.body) == {"a": 1, "t": "é"}
    odd = SafeJSONResponse({"x": float("nan"), "id": "\ud800"})
    assert json.loads(odd.body) == {"x": None, "id": "\ufffd"}
    assert b"NaN" not in odd.body


# -- validators ------------------------------------------------------------------------------


def test_a_timestamp_out_of_range_in_utc_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as caught:
        ListTasksRequest.model_validate({"statusTimestampAfter": "0001-01-01T00:00:00+14:00"})
    assert caught.value.errors()[0]["loc"] == ("statusTimestampAfter",)
    assert "out of range" in caught.value.errors()[0]["msg"]
    ListTasksRequest.model_validate({"statusTimestampAfter": "0001-01-01T00:00:00-14:00"})


@pytest.mark.parametrize("role", [["user"], {"a": 1}, 1])
def test_v03_role_of_the_wrong_type_names_the_field(role: Any) -> None:
    with pytest.raises(v03.InvalidParamsError) as caught:
        v03.message_from_v03({"messageId": "m", "role": role, "parts": []})
    assert [field for field, _ in caught.value.violations] == ["message.role"]


@pytest.mark.parametrize("schemes", [{"a": 1}, "Bearer", [], None])
def test_v03_authentication_schemes_of_the_wrong_shape_name_the_field(schemes: Any) -> None:
    params = {
        "taskId": "t",
        "pushNotificationConfig": {
            "url": "https://x.test/",
            "authentication": {"schemes": schemes},
        },
    }
    with pytest.raises(v03.InvalidParamsError) as caught:
        v03.push_config_from_v03(params)
    assert [field for field, _ in caught.value.violations] == [
        "pushNotificationConfig.authentication.schemes"
    ]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_stream_frames_never_carry_a_bare_nan(version: str) -> None:
    task = Task(
        id="t",
        context_id="c",
        status=TaskStatus(state=TaskState.WORKING),
        metadata={"x": float("nan"), "y": [float("-inf")]},
    )
    event = StreamResponse(task=task)
    codec = CODECS[version]
    if version == "0.3":  # the 0.3 codec copies metadata as it is (1.0's wire() nulls NaN)
        assert b"NaN" in frame({"result": codec.event(event)})
    data = frame(stream_frame("s-1", codec, event))
    assert b"NaN" not in data and b"Infinity" not in data, data
    result = json.loads(data.removeprefix(b"data: "))["result"]
    assert result.get("task", result)["metadata"] == {"x": None, "y": [None]}, result
