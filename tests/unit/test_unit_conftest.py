"""What tests/unit/conftest.py gives every unit test besides the code-only guard."""

from __future__ import annotations

import os
import time
from pathlib import Path

from a2a_serverless.local import template

ROOT = Path(__file__).resolve().parents[2]


def test_no_instance_metadata_lookup() -> None:
    assert os.environ["AWS_EC2_METADATA_DISABLED"] == "true"


def test_a_template_text_is_parsed_once_and_each_caller_gets_its_own_copy() -> None:
    text = (ROOT / "template.yaml").read_text() + f"\n# {time.monotonic_ns()}\n"  # a new text
    started = time.perf_counter()
    first = template.load_template_text(text)
    parsing = time.perf_counter() - started
    started = time.perf_counter()
    second = template.load_template_text(text)
    again = time.perf_counter() - started
    assert first == second and first is not second
    first["Resources"].clear()
    assert template.load_template_text(text)["Resources"] == second["Resources"] != {}
    path = ROOT / "template.yaml"
    assert template.load_template(path) == template.load_template(path)
    assert again < parsing / 3, (again, parsing)
