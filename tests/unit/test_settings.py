"""Settings: every function's configuration, parsed from the environment at init."""

from __future__ import annotations

import re

import pytest

from a2a_serverless.settings import Settings, SettingsError, get_settings


def test_defaults_are_the_declared_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    settings = Settings()
    for name, field in Settings.model_fields.items():
        assert getattr(settings, name) == field.default, name


def test_environment_values_are_parsed_to_each_fields_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETENTION_DAYS", " 7 ")
    monkeypatch.setenv("stream_max_seconds", "12.5")  # names match case-insensitively
    monkeypatch.setenv("STREAMING", "Off")
    monkeypatch.setenv("PUSH_ALLOW_HTTP", "1")
    monkeypatch.setenv("AUTH_MODE", "Jwt")
    monkeypatch.setenv("BEDROCK_TOP_P", "0.25")
    monkeypatch.setenv("SOMETHING_ELSE", "ignored")
    settings = Settings()
    assert settings.retention_days == 7 and isinstance(settings.retention_days, int)
    assert settings.stream_max_seconds == 12.5
    assert settings.streaming is False and settings.push_allow_http is True
    assert settings.auth_mode == "Jwt"
    assert settings.bedrock_top_p == 0.25
    assert not hasattr(settings, "something_else")


def test_keyword_arguments_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TABLE_NAME", "from-env")
    assert Settings(table_name="given").table_name == "given"
    assert Settings(max_json_depth=8, streaming=False).max_json_depth == 8
    with pytest.raises(TypeError, match="unknown settings: no_such"):
        Settings(no_such=1)


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RETENTION_DAYS", "0", "RETENTION_DAYS must be >= 1 (got '0')"),
        ("RETENTION_DAYS", "7.5", "RETENTION_DAYS must be an integer"),
        ("RETENTION_DAYS", "", "RETENTION_DAYS must be an integer"),
        ("MAX_JSON_DEPTH", "65", "MAX_JSON_DEPTH must be <= 64"),
        ("STREAM_MAX_SECONDS", "0", "STREAM_MAX_SECONDS must be > 0"),
        ("STREAM_MAX_SECONDS", "nan", "STREAM_MAX_SECONDS must be a finite number"),
        ("BLOCKING_MAX_WAIT_SECONDS", "inf", "must be a finite number"),
        ("DEDUPE_WINDOW_SECONDS", "-1", "must be >= 0"),
        ("STREAMING", "maybe", "STREAMING must be true or false"),
        ("AUTH_MODE", "apikey", "AUTH_MODE must be one of 'ApiKey', 'Jwt', 'Iam', 'None'"),
        ("BEDROCK_TOP_P", "1.5", "BEDROCK_TOP_P must be <= 1"),
    ],
)
def test_a_bad_value_names_the_variable_the_rule_and_the_value(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=re.escape(says)):
        Settings()


def test_every_bad_value_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETENTION_DAYS", "x")
    monkeypatch.setenv("STREAMING", "x")
    with pytest.raises(SettingsError) as raised:
        Settings()
    assert "RETENTION_DAYS" in str(raised.value) and "STREAMING" in str(raised.value)


def test_keyword_values_are_checked_too() -> None:
    with pytest.raises(SettingsError, match="RETENTION_DAYS must be an integer"):
        Settings(retention_days=1.5)
    with pytest.raises(SettingsError, match="TABLE_NAME must be a string"):
        Settings(table_name=3)
    with pytest.raises(SettingsError, match="MAX_BODY_BYTES must be an integer"):
        Settings(max_body_bytes=True)


def test_a_body_larger_than_lambda_takes_is_refused() -> None:
    """Lambda takes 6,291,456 bytes of invocation payload, the body escaped inside API
    Gateway's event: the body limit stops at 6,000,000, its default."""
    with pytest.raises(SettingsError, match="MAX_BODY_BYTES"):
        Settings(max_body_bytes=6_000_001)
    assert Settings().max_body_bytes == 6_000_000
    assert Settings(max_body_bytes=262_144).max_body_bytes == 262_144


def test_every_field_accepts_its_own_default() -> None:
    for name, field in Settings.model_fields.items():
        assert getattr(Settings(**{name: field.default}), name) == field.default, name


@pytest.mark.parametrize("value", ["1", "true", "T", " yes ", "Y", "on"])
def test_booleans_accept_the_usual_words_for_true(value: str) -> None:
    assert Settings(streaming=False, push_allow_http=value).push_allow_http is True


@pytest.mark.parametrize("value", ["0", "false", "F", " no ", "N", "OFF"])
def test_booleans_accept_the_usual_words_for_false(value: str) -> None:
    assert Settings(streaming=value).streaming is False


def test_settings_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    get_settings.cache_clear()
    monkeypatch.setenv("TABLE_NAME", "first")
    first = get_settings()
    monkeypatch.setenv("TABLE_NAME", "second")
    assert get_settings() is first and first.table_name == "first"
    get_settings.cache_clear()
