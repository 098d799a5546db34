"""What a newcomer's first mistakes get from the `a2a-serverless` command, without a stack:
the `local` extra not installed, an event file missing, not JSON, not an object or with a
misspelled key, the guard of the stack's `/_local/invoke`, and the Bedrock flow's turn when
the client cannot be made (the local stack's "not emulated")."""

from __future__ import annotations

import importlib.abc
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.cli import main
from a2a_serverless.cli.invoke import (
    AUTHORIZER_REQUEST_KEYS,
    BATCH_KEYS,
    REST_PROXY_KEYS,
    STEP_INPUT_KEYS,
    UsageError,
    check_keys,
    event_source,
    read_event,
)
from a2a_serverless.flows import OutcomeKind, StepContext
from a2a_serverless.flows import bedrock as bedrock_flow
from a2a_serverless.flows.bedrock import BedrockFailure, BedrockFlow
from a2a_serverless.local.admin import AdminError, _check_local
from a2a_serverless.local.template import load_template
from a2a_serverless.models import Message, Part, Role
from tests.helpers import RecordingEmitter

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"


@pytest.fixture(autouse=True)
def _process_state() -> Iterator[None]:
    """The environment and sys.path as before: a command that gets further than these tests
    mean it to sets what it may (POWERTOOLS_METRICS_DISABLED, the folder on sys.path)."""
    environ, path = dict(os.environ), list(sys.path)
    yield
    os.environ.clear()
    os.environ.update(environ)
    sys.path[:] = path


# -- the local extra ---------------------------------------------------------------------------


class _Uninstalled(importlib.abc.MetaPathFinder):
    """Imports of these top-level modules fail as if they were not installed."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


@pytest.fixture
def uninstalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make modules uninstalled for the test: out of sys.modules and refused on import."""

    def make(*names: str) -> None:
        for loaded in list(sys.modules):
            if loaded.split(".")[0] in names:
                monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setattr(sys, "meta_path", [_Uninstalled(*names), *sys.meta_path])

    yield make


@pytest.mark.parametrize(
    ("argv", "missing"),
    [
        (["dev"], "moto"),
        (["dev", "--reload"], "uvicorn"),
        (["invoke", "SendMessageFunction", str(EVENTS / "send_message.json")], "moto"),
        (["invoke", "SendMessageFunction", str(EVENTS / "send_message.json")], "yaml"),
    ],
)
def test_without_the_local_extra_a_command_names_the_module_and_the_install(
    argv: list[str], missing: str, uninstalled: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    uninstalled(missing)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"{missing!r}" in lines[0]
    assert "[local]" in lines[0] and "pip install" in lines[0]
    assert "Traceback" not in err


class _Installed:
    """importlib.metadata's view of an installation pip recorded (direct_url.json)."""

    version = "9.9.9"

    def __init__(self, direct_url: dict[str, Any] | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


@pytest.mark.parametrize(
    ("direct_url", "command"),
    [
        (
            {"url": "file:///home/me/agent/vendor/a2a_serverless-0.1.0-py3-none-any.whl"},
            'pip install "/home/me/agent/vendor/a2a_serverless-0.1.0-py3-none-any.whl[local]"',
        ),
        (
            {"url": "file:///src/a2a%20serverless", "dir_info": {"editable": True}},
            'pip install -e "/src/a2a serverless[local]"',
        ),
        (
            None,
            'pip install "a2a-serverless[local]" (from a wheel: '
            'pip install "/path/to/a2a_serverless-9.9.9-py3-none-any.whl[local]"',
        ),
    ],
)
def test_the_install_command_is_the_one_for_this_installation(
    direct_url: dict[str, Any] | None, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import metadata

    from a2a_serverless.cli.dev import install_command

    monkeypatch.setattr(metadata, "distribution", lambda name: _Installed(direct_url))
    assert install_command().startswith(command)


# -- the event file ----------------------------------------------------------------------------


def invoke_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `invoke` prints on stderr when it refuses, having exited 2."""
    assert main(["invoke", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no event file"),
        (
            '{"path": "/", }',
            "not JSON: Expecting property name enclosed in double quotes at line 1, column 15",
        ),
        ('{\n  "path": "/"\n  "body": null\n}', "line 3, column 3"),
        ("[1, 2]", "an event is a JSON object, this is a list"),
        ('"text"', "this is a string"),
    ],
)
def test_a_bad_event_file_is_one_line(
    content: str | None, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "event.json"
    if content is not None:
        path.write_text(content)
    line = invoke_error(["GetTaskFunction", str(path)], capsys)
    assert expected in line
    assert str(path) in line


def test_a_folder_is_no_event_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="a folder"):
        read_event(str(tmp_path))


def test_the_event_source_of_each_function_comes_from_the_template() -> None:
    template = load_template(ROOT / "template.yaml")
    assert event_source(template, "GetTaskFunction") == (
        "an API Gateway REST proxy event",
        REST_PROXY_KEYS,
    )
    expected = {
        "StreamFunction": REST_PROXY_KEYS,  # a Web Adapter function
        "AuthorizerFunction": AUTHORIZER_REQUEST_KEYS,
        "FlowWorkerFunction": STEP_INPUT_KEYS,
        "WebhookSenderFunction": BATCH_KEYS,
    }
    for function, keys in expected.items():
        source = event_source(template, function)
        assert source is not None and source[1] == keys, function
    assert event_source(template, "NoSuchFunction") is None


def test_every_sample_event_has_only_keys_of_its_source() -> None:
    from tests.integration.test_event_samples import SAMPLES

    template = load_template(ROOT / "template.yaml")
    for name, function in SAMPLES.items():
        event = read_event(str(EVENTS / name))
        check_keys(event, function, event_source(template, function))  # raises if not


@pytest.mark.parametrize(
    ("sample", "function", "key", "typo"),
    [
        ("get_task.json", "GetTaskFunction", "httpMethod", "httpMetod"),
        ("send_message.json", "SendMessageFunction", "requestContext", "requestcontext"),
        ("authorizer_request.json", "AuthorizerFunction", "methodArn", "methodARN"),
        ("flow_worker_step.json", "FlowWorkerFunction", "taskId", "task_id"),
        ("webhook_retry_batch.json", "WebhookSenderFunction", "Records", "records"),
        ("webhook_stream_batch.json", "WebhookSenderFunction", "Records", "Record"),
    ],
)
def test_a_misspelled_key_is_named_with_the_closest_expected_one(
    sample: str,
    function: str,
    key: str,
    typo: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    event = json.loads((EVENTS / sample).read_text())
    event = {(typo if k == key else k): v for k, v in event.items()}
    path = tmp_path / sample
    path.write_text(json.dumps(event))
    line = invoke_error([function, str(path), "--template", str(ROOT / "template.yaml")], capsys)
    assert f"unknown key {typo!r}" in line
    assert f"did you mean {key!r}?" in line
    assert function in line


def test_a_key_like_no_expected_one_lists_them() -> None:
    with pytest.raises(UsageError, match=r"\(expected: Records\)$") as raised:
        check_keys({"zzz": 1}, "WebhookSenderFunction", ("a batch", BATCH_KEYS))
    assert "'zzz'" in str(raised.value)


def test_with_url_a_bad_event_is_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "e.json"
    path.write_text("{")
    # Port 9 (discard): nothing is sent, the file is refused first.
    line = invoke_error(["GetTaskFunction", str(path), "--url", "http://127.0.0.1:9"], capsys)
    assert "not JSON" in line


def test_stdin_is_read_as_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"Records": []}'))
    assert read_event("-") == {"Records": []}


# -- /_local/invoke: this machine only ---------------------------------------------------------


def scope(
    client: str = "127.0.0.1",
    server: str = "127.0.0.1",
    host: bytes = b"127.0.0.1:8000",
    content_type: bytes = b"application/json",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> dict[str, Any]:
    headers = [(b"host", host), (b"content-type", content_type), *(extra or [])]
    return {"client": (client, 50000), "server": (server, 8000), "headers": headers}


@pytest.mark.parametrize(
    "allowed",
    [
        scope(),
        scope(host=b"localhost:8000"),
        scope(client="::1", server="::1", host=b"[::1]:8000"),
        scope(client="::ffff:127.0.0.1"),
        scope(content_type=b"application/json; charset=utf-8"),
    ],
)
def test_invoke_answers_a_json_request_over_loopback(allowed: dict[str, Any]) -> None:
    _check_local(allowed)


@pytest.mark.parametrize(
    "refused",
    [
        scope(client="192.168.1.20"),  # another machine
        scope(server="192.168.1.5"),  # the stack's outside address (dev --host 0.0.0.0)
        scope(host=b"attacker.example:8000"),  # DNS rebinding
        scope(extra=[(b"x-forwarded-for", b"203.0.113.9")]),  # a tunnel or proxy relaying
        scope(extra=[(b"forwarded", b"for=203.0.113.9")]),
        scope(content_type=b"text/plain"),  # what a cross-site form can send unannounced
        {"client": None, "server": None, "headers": []},
    ],
)
def test_invoke_refuses_anything_else(refused: dict[str, Any]) -> None:
    with pytest.raises(AdminError) as raised:
        _check_local(refused)
    assert raised.value.status == 403


# -- the Bedrock flow when its client cannot be made --------------------------------------------


def test_a_failure_making_the_client_ends_the_turn_with_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said = "Amazon Bedrock is not emulated here; set X=1."

    def not_here(config: Any) -> Any:
        raise BedrockFailure(said, "NotEmulatedLocally")

    monkeypatch.setattr(bedrock_flow, "new_client", not_here)
    message = Message(message_id="u1", role=Role.USER, parts=[Part(text="hi")])
    emitter = RecordingEmitter()
    ctx = StepContext(
        task_id="t1",
        context_id="c1",
        turn=0,
        step=0,
        message=message,
        history=[message],
        state={},
        emitter=emitter,
    )
    outcome = BedrockFlow(model_id="m", sleep=lambda s: None).step(ctx)
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.message is not None and said in str(outcome.message)
    assert emitter.chunks == []
