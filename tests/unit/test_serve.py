"""a2a_serverless.serve: the uvicorn options the Web Adapter functions' run.sh starts with."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_serverless import serve


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(serve.uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    return calls


def test_the_app_is_served_on_the_adapter_s_loopback_port(
    started: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PORT", "9123")
    serve.main(["app:app"])
    [(app, options)] = started
    assert app == "app:app"
    assert options["host"] == "127.0.0.1" and options["port"] == 9123  # the adapter only


@pytest.mark.parametrize("port", [None, ""])
def test_an_unset_port_is_the_adapter_s_default(
    started: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, port: str | None
) -> None:
    if port is None:
        monkeypatch.delenv("PORT", raising=False)
    else:
        monkeypatch.setenv("PORT", port)
    serve.main(["app:app"])
    assert started[0][1]["port"] == 8080


def test_the_options_suit_one_pooling_local_peer(
    started: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PORT", raising=False)
    serve.main(["app:app"])
    options = started[0][1]
    # No idle timeout racing the adapter's pool, heads up to 256 KiB, nothing added to the
    # answers or the logs, X-Forwarded-* not applied to the scope.
    assert options["timeout_keep_alive"] == 86400
    assert options["h11_max_incomplete_event_size"] == 262144
    assert (options["http"], options["loop"], options["lifespan"]) == ("h11", "asyncio", "off")
    assert not (options["access_log"] or options["server_header"] or options["date_header"])
    assert options["proxy_headers"] is False
