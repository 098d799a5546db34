"""The echo flow's chunking and the flow loader."""

from __future__ import annotations

import pytest

from a2a_serverless.flows import Flow, Outcome, StepContext, load_flow
from a2a_serverless.flows.echo import _chunks
from a2a_serverless.flows.emitter import MAX_CHUNK_CHARS, _split_parts
from a2a_serverless.models import Part


@pytest.mark.parametrize("count", [1, 2, 4, 10])
def test_chunks_keep_every_character(count: int) -> None:
    text = "Echo: the quick  brown fox\njumps"
    pieces = _chunks(text, count)
    assert "".join(pieces) == text
    assert 1 <= len(pieces) <= count


def test_large_text_is_split_below_the_item_limit() -> None:
    groups = _split_parts([Part(text="x" * (MAX_CHUNK_CHARS * 3 + 5))])
    assert len(groups) == 4
    assert "".join(p.text or "" for g in groups for p in g) == "x" * (MAX_CHUNK_CHARS * 3 + 5)


def test_oversized_binary_part_is_refused_with_advice() -> None:
    with pytest.raises(ValueError, match="url"):
        _split_parts([Part(raw="A" * 400_000)])


def shout(ctx: StepContext) -> Outcome:
    return Outcome.completed(ctx.text.upper())


class Upper(Flow):
    def step(self, ctx: StepContext) -> Outcome:
        return Outcome.completed()


def test_load_flow_accepts_instance_class_and_function() -> None:
    assert load_flow("a2a_serverless.flows.echo:flow").name == "echo"
    assert isinstance(load_flow("tests.unit.test_echo_and_flows:Upper"), Upper)
    assert load_flow("tests.unit.test_echo_and_flows:shout").name == "shout"
    with pytest.raises(ValueError, match="module:attribute"):
        load_flow("no_colon")
