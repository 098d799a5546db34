"""A flow step's event at seq 1 or 2 (store/dynamodb/tasks.py `_append_early_event`): the
header may stand for those events (keys.header_events), so the event item is written in a
transaction with a ConditionCheck on the task's header, which IAM authorizes as
dynamodb:ConditionCheckItem. The only caller in the deployed code is the flow worker's
LogEmitter (flows/emitter.py), when a step writes right after the task's first event; the
worker's `begin` writes the WORKING status (seq 2) first, so the echo flow never takes this
path, and no test of a running flow did: here the emitter takes it, as FlowWorkerFunction on
the recording stack, so that the observed-calls IAM check (this test's, and the session's)
sees the call."""

from __future__ import annotations

import os
from pathlib import Path

from a2a_serverless import wiring
from a2a_serverless.flows.base import ArtifactChunk
from a2a_serverless.flows.emitter import LogEmitter
from a2a_serverless.local.calls import CALL_LOG_ENV, acting_as
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import Part
from tests.contract.cases import create, uid
from tests.iam_check import CallLog, evaluate, read_log
from tests.template.sam import load_sam, translate


def test_a_steps_event_at_seq_two_is_checked_against_the_header(local_stack: LocalStack) -> None:
    store = wiring.get_store()
    record = create(store, uid("owner"))  # SUBMITTED, its one event in the header
    with acting_as("FlowWorkerFunction", local_stack.stack_id):
        emitter = LogEmitter(store, record, seq=1, step=0)
        emitter.artifact(ArtifactChunk(parts=[Part(text="early")], artifact_id="a1"))
    assert emitter.seq == 2
    assert [seq for seq, _ in store.read_events(record.task_id, 0)] == [1, 2]

    session = read_log(Path(os.environ[CALL_LOG_ENV]))
    mine = CallLog(
        stacks={local_stack.stack_id: session.stacks[local_stack.stack_id]},
        calls={(s, c): None for s, c in session.calls if s == local_stack.stack_id},
    )
    transaction = {c.action for _, c in mine.calls if c.operation == "dynamodb:TransactWriteItems"}
    assert transaction == {"dynamodb:ConditionCheckItem", "dynamodb:PutItem"}
    report = evaluate(mine, translate(load_sam()))
    assert not report.failed, report.denied
