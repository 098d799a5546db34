"""The key layout (store/dynamodb/keys.py): joined keys are injective, and every key stays within
DynamoDB's byte limits when each caller-chosen part is at its bound."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.models import TaskState, format_timestamp

# Strings that break naive joins and escapes: the separator, the escape character, the
# escape sequences themselves, empty, non-ASCII (2-, 3- and 4-byte UTF-8).
TRICKY = ["", "#", "%", "%23", "%25", "%2523", "a#", "#a", "a%", "##", "%%", "é", "€", "😀", "a"]


def all_pairs(atoms: list[str], length: int) -> list[str]:
    """Every string of up to `length` atoms."""
    return [
        "".join(combo)
        for size in range(length + 1)
        for combo in itertools.product(atoms, repeat=size)
    ]


STRINGS = sorted(set(all_pairs(["#", "%", "2", "3", "5", "a"], 3)) | set(TRICKY))


def test_escape_leaves_no_separator_and_round_trips() -> None:
    for value in STRINGS:
        escaped = keys.escape(value)
        assert keys.SEPARATOR not in escaped, value
        assert keys.unescape(escaped) == value, value
        assert keys.utf8_size(escaped) <= keys.ESCAPE_GROWTH * keys.utf8_size(value), value


def test_plain_parts_are_unchanged() -> None:
    """UUIDs and ordinary principals keep the keys they had before escaping existed."""
    for value in ["alice", "0f1e2d3c-aaaa-bbbb-cccc-000000000000", "arn:aws:sts::1:x/y", "é😀"]:
        assert keys.escape(value) == value
    assert keys.join("alice", "ctx-1") == "alice#ctx-1"


def test_join_is_injective_over_tricky_pairs() -> None:
    seen: dict[str, tuple[str, str]] = {}
    for pair in itertools.product(STRINGS, repeat=2):
        joined = keys.join(*pair)
        assert seen.setdefault(joined, pair) == pair, (joined, seen[joined], pair)
        assert keys.split(joined) == list(pair)


def test_join_is_injective_over_random_strings() -> None:
    rng = random.Random(10)
    alphabet = "#%235a😀é"
    seen: dict[str, tuple[str, ...]] = {}
    for _ in range(20_000):
        parts = tuple(
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
            for _ in range(rng.randrange(1, 4))
        )
        joined = keys.join(*parts)
        assert seen.setdefault(joined, parts) == parts, (joined, seen[joined], parts)
        assert tuple(keys.split(joined)) == parts


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("alice2#proj", "1"), ("alice2", "proj#1")),
        (("alice2%23proj", "1"), ("alice2#proj", "1")),  # an escape in the input stays distinct
        (("a", "%23"), ("a", "#")),
        (("a#", ""), ("a", "#")),
    ],
)
def test_owner_scoped_keys_of_the_issue_differ(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    assert keys.join(*first) != keys.join(*second)
    assert keys.dedupe_key(*first) != keys.dedupe_key(*second)


def test_index_sort_keys_keep_their_order() -> None:
    early = keys.index_sort_key("2026-01-01T00:00:00.000Z", "#%")
    late = keys.index_sort_key("2026-01-01T00:00:00.001Z", "")
    assert early < late
    # ListTasks' statusTimestampAfter bound (>=): below every key of its time, above earlier ones.
    bound = keys.status_at_or_after(datetime(2026, 1, 1, 0, 0, 0, 1000, tzinfo=UTC))
    assert early < bound <= late


def test_the_status_time_bound_rounds_up_to_stored_precision() -> None:
    at = datetime(2026, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)
    assert keys.status_at_or_after(at) == "2026-01-01T00:00:00.001Z"
    assert keys.status_at_or_after(at + timedelta(microseconds=1)) == "2026-01-01T00:00:00.002Z"
    assert keys.status_at_or_after(at - timedelta(microseconds=999)) == "2026-01-01T00:00:00.001Z"
    last = datetime(9999, 12, 31, 23, 59, 59, 999_001, tzinfo=UTC)
    assert keys.status_at_or_after(last) > keys.index_sort_key(format_timestamp(last), "z" * 64)


# -- bounds ----------------------------------------------------------------------------------


def worst(size: int, char: str) -> str:
    """A string of `size` UTF-8 bytes made of `char` (as many as fit)."""
    return char * (size // keys.utf8_size(char))


@pytest.mark.parametrize("char", ["#", "%", "a", "😀", "€"])
def test_every_key_fits_with_every_part_at_its_bound(char: str) -> None:
    owner = worst(keys.MAX_OWNER_BYTES, char)
    an_id = worst(keys.MAX_ID_BYTES, char)
    config_id = worst(keys.MAX_CONFIG_ID_BYTES, char)
    timestamp = "2026-12-31T23:59:59.999Z"
    assert len(timestamp) == keys.TIMESTAMP_BYTES
    partitions = [
        keys.task_pk(an_id)["S"],
        keys.owner_pk(owner)["S"],
        keys.dedupe_key(owner, an_id)["pk"]["S"],
        owner,  # g1pk
    ]
    sorts = [
        keys.push_key(an_id, config_id)["sk"]["S"],
        keys.context_counter_sk(an_id),
        keys.index_sort_key(timestamp, an_id),
    ]
    for value in partitions:
        assert keys.utf8_size(value) <= keys.PARTITION_KEY_MAX_BYTES, value[:40]
    for value in sorts:
        assert keys.utf8_size(value) <= keys.SORT_KEY_MAX_BYTES, value[:40]
    # The budgets are the worst case: the all-`#` strings reach them exactly.
    if char == "#":
        assert (
            keys.utf8_size(keys.dedupe_key(owner, an_id)["pk"]["S"])
            == (keys.KEY_BUDGETS["D# retry record partition"][0])
        )


def test_budgets_are_within_dynamodb_limits() -> None:
    assert keys.PARTITION_KEY_MAX_BYTES == 2048 and keys.SORT_KEY_MAX_BYTES == 1024
    for name, (worst_case, limit) in keys.KEY_BUDGETS.items():
        assert worst_case <= limit, name
    # The issue-11 case: 256 four-byte characters are 1024 bytes, four times the id bound.
    assert keys.utf8_size("😀" * 256) == 1024 > keys.MAX_ID_BYTES


def test_key_fits_matches_dynamodb_limits() -> None:
    assert keys.key_fits(keys.task_key("t" * 2046, keys.HEADER))
    assert not keys.key_fits(keys.task_key("t" * 2047, keys.HEADER))
    assert keys.key_fits(keys.push_key("t", "😀" * 255 + "cc"))  # 2 + 1020 + 2 bytes
    assert not keys.key_fits(keys.push_key("t", "😀" * 256))


def test_page_tokens_round_trip_tricky_positions() -> None:
    cursor = {"k": keys.index_sort_key("2026-01-01T00:00:00.000Z", "#%😀"), "id": "#%😀"}
    assert keys.decode_page_token(keys.encode_page_token(cursor)) == cursor


def test_expired_header_names_only_task_headers() -> None:
    image = {
        "pk": "T#t1",
        "sk": "H",
        "owner": "o#1",
        "contextId": "c",
        "state": "TASK_STATE_WORKING",
    }
    assert keys.expired_header(image) == ("t1", "o#1", "c", TaskState.WORKING)
    for other in (
        {**image, "sk": "E#0000000001"},  # an event
        {**image, "pk": "O#o#1"},  # a counter
        {**image, "state": "NOT_A_STATE"},
        {k: v for k, v in image.items() if k != "owner"},
    ):
        assert keys.expired_header(other) is None, other


# A new task's header image (deserialized, as the stream gives it) marked to stand for event 1.
MARKED_HEADER = {
    "pk": "T#t1",
    "sk": "H",
    "taskId": "t1",
    "contextId": "c1",
    "createdAt": "2026-01-02T03:04:05.678Z",
    keys.FIRST_EVENT: True,
}


def test_a_marked_header_is_the_stream_event_of_its_first_event() -> None:
    """A new task's header marked `e1` stands for event 1: its stream INSERT carries it."""
    image = dict(MARKED_HEADER)
    task_id, seq, body = keys.stream_event(image) or ("", 0, b"")
    assert (task_id, seq) == ("t1", 1)
    expected = keys.creation_event("t1", "c1", "2026-01-02T03:04:05.678Z")
    assert body == keys.dumps(expected.wire()).encode()
    assert b'"timestamp":"2026-01-02T03:04:05.678Z"' in body
    assert b'"state":"TASK_STATE_SUBMITTED"' in body
    for other in (
        {k: v for k, v in image.items() if k != keys.FIRST_EVENT},  # event 1 is an item
        {**image, keys.FIRST_EVENT: "true"},  # not the mark the store writes
        {**image, "createdAt": "not a time"},
        {k: v for k, v in image.items() if k != "contextId"},
    ):
        assert keys.stream_event(other) is None, other


def test_a_header_stands_for_exactly_the_creation_status() -> None:
    from a2a_serverless.models import Message, Part

    created = "2026-01-02T03:04:05.678Z"
    event = keys.creation_event("t1", "c1", created)
    assert keys.stands_for_first_event("t1", "c1", created, 1, event)
    assert not keys.stands_for_first_event("t1", "c1", created, 2, event)  # not event 1
    assert not keys.stands_for_first_event("t1", "c2", created, 1, event)
    assert not keys.stands_for_first_event("t1", "c1", "2026-01-02T03:04:05.679Z", 1, event)
    with_message = event.model_copy(deep=True)
    with_message.status_update.status.message = Message(  # type: ignore[union-attr]
        message_id="m1", role="ROLE_AGENT", parts=[Part(text="queued")]
    )
    assert not keys.stands_for_first_event("t1", "c1", created, 1, with_message)


def test_the_header_update_adding_w1_is_the_stream_event_of_the_first_working_status() -> None:
    from decimal import Decimal

    before = dict(MARKED_HEADER)
    after = {**before, keys.WORKING_SEQ: Decimal(2), keys.WORKING_AT: "2026-01-02T03:04:06.000Z"}
    task_id, seq, body = keys.stream_event(after, before) or ("", 0, b"")
    assert (task_id, seq) == ("t1", 2)
    expected = keys.working_event("t1", "c1", "2026-01-02T03:04:06.000Z")
    assert body == keys.dumps(expected.wire()).encode()
    assert b'"state":"TASK_STATE_WORKING"' in body
    assert keys.stream_event(after, after) is None  # a later write of the header
    assert keys.stream_event(before, before) is None  # a write that adds no event
    assert keys.stream_event({**after, keys.WORKING_AT: "noon"}, before) is None
    # An event item's update (never written twice) is no event.
    item = {"pk": "T#t1", "sk": "E#0000000003", "ev": "{}"}
    assert keys.stream_event(item, item) is None
    assert keys.stream_event(item) == ("t1", 3, b"{}")


def test_the_first_message_is_the_headers_up_to_the_size_bound() -> None:
    """`with_first_message` keeps the header within INLINE_HEADER_MAX_BYTES (DynamoDB's item
    size: names plus values); a message one byte larger stays an item of its own."""
    from a2a_serverless.models import Message, Part

    def message(text: str) -> Message:
        return Message(message_id="m", role="user", parts=[Part(text=text)])

    base = {"pk": keys.s("T#t"), "sk": keys.s("H"), "hcount": keys.n(1)}
    room = keys.INLINE_HEADER_MAX_BYTES - keys.item_bytes(
        {**base, keys.FIRST_MESSAGE: keys.s(keys.dumps(message("").wire()))}
    )
    fits, header = message("é" * (room // 2)), dict(base)  # 2 bytes a character
    assert keys.with_first_message(header, fits) and keys.FIRST_MESSAGE in header
    assert keys.item_bytes(header) <= keys.INLINE_HEADER_MAX_BYTES
    assert keys.history_of(header, []) == [fits]
    over, header = message("é" * (room // 2) + "x" * (room % 2 + 1)), dict(base)
    assert not keys.with_first_message(header, over) and header == base
    assert keys.item_bytes(base) == (2 + 3) + (2 + 1) + (6 + 2)  # names + values; N "1": 2


@pytest.mark.parametrize(
    ("counter", "since"),
    [
        ({"all": {"N": "1"}}, None),  # no `since`: a counter from before it, or none yet
        ({"since": {"S": "T"}, "all": {"N": "1"}, "sinceN": {"N": "1"}}, "T"),
        # two counted, one of them expired since: it still says
        ({"since": {"S": "T"}, "all": {"N": "1"}, "sinceN": {"N": "2"}, "gone": {"N": "1"}}, "T"),
        # it counted a task before `since` was set (3 now, 1 since): older tasks may be there
        ({"since": {"S": "T"}, "all": {"N": "3"}, "sinceN": {"N": "1"}}, None),
        # ... and after those older ones expired too: it never says again
        ({"since": {"S": "T"}, "all": {"N": "1"}, "sinceN": {"N": "1"}, "gone": {"N": "2"}}, None),
        # made by an expiry that found no counter (started at -1): no `since`
        ({"all": {"N": "-1"}, "gone": {"N": "1"}}, None),
    ],
)
def test_a_context_counter_says_since_when_it_counts_only_when_it_counted_nothing_before(
    counter: dict[str, Any], since: str | None
) -> None:
    assert keys.context_since(counter) == since
