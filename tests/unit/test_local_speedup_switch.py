"""The local stack's moto pin, the attribute check of its patches and A2A_LOCAL_SPEEDUPS."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from a2a_serverless.local import moto_speedups, patching
from a2a_serverless.local.patching import Patch

ROOT = Path(__file__).resolve().parents[2]


def test_the_local_extra_pins_the_moto_of_the_constraints_file() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["local"]
    [moto] = [r for r in extra if r.startswith("moto")]
    pinned = re.fullmatch(r"moto\[[\w,]+\]==([\w.]+)", moto)
    assert pinned is not None, f"the local extra does not pin moto exactly: {moto}"
    assert patching.MOTO_CONSTRAINTS.is_file()
    assert pinned.group(1) == patching.pinned_moto_version()


def test_env_script_installs_with_the_moto_constraints() -> None:
    script = (ROOT / "scripts" / "_env.sh").read_text()
    assert "shared/a2a_serverless/local/moto-constraints.txt" in script
    assert '-c "$MOTO_CONSTRAINTS"' in script


NAMES = [s.name for s in moto_speedups.SPEEDUPS]


@pytest.mark.parametrize("value", [None, "", "1", "all", " all "])
def test_every_speedup_by_default(value: str | None) -> None:
    assert [s.name for s in moto_speedups.chosen(value)] == NAMES


@pytest.mark.parametrize("value", ["0", "none"])
def test_none_when_switched_off(value: str) -> None:
    assert moto_speedups.chosen(value) == []


def test_all_but_one_and_a_list() -> None:
    first, *rest = NAMES
    assert [s.name for s in moto_speedups.chosen(f"all,-{first}")] == rest
    assert [s.name for s in moto_speedups.chosen(f"{rest[-1]},{first}")] == [first, rest[-1]]


def test_an_unknown_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no_such_speedup"):
        moto_speedups.chosen("all,-no_such_speedup")


def _declared(*replaces: str, reimplements: bool = False) -> Patch:
    return patching.patch(*replaces, reimplements=reimplements)(lambda patches: None)


def test_problem_names_a_missing_or_changed_attribute() -> None:
    assert patching.problem(_declared("json:dumps", "json:JSONDecoder.decode(self, s, _w)")) is None
    assert patching.problem(_declared("json:no_such_thing")) == "json:no_such_thing is missing"
    assert patching.problem(_declared("no_such_module:x")) == "no_such_module:x is missing"
    assert patching.problem(_declared("json:JSONDecoder.decode(self, s)")) == (
        "json:JSONDecoder.decode takes (self, s, _w), not (self, s)"
    )


def test_a_reimplementation_needs_the_pinned_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = _declared("json:dumps", reimplements=True)
    monkeypatch.setattr(patching, "pinned_moto_version", lambda: "0.0.1")
    found = patching.problem(declared)
    assert found is not None and found.endswith("the patch was written for 0.0.1")


def test_every_speedup_and_fix_declares_what_it_replaces() -> None:
    for declared in moto_speedups.SPEEDUPS:
        assert declared.replaces, declared.name
        assert declared.apply.__doc__, declared.name
        assert len(declared.apply.__doc__.strip().splitlines()) <= 3, declared.name


class _Target:
    def method(self, value: int) -> int:
        return value


def test_undo_puts_a_static_or_class_method_back_as_it_was() -> None:
    class Target:
        @staticmethod
        def static() -> int:
            return 1

        @classmethod
        def made(cls) -> int:
            return 2

    before = dict(vars(Target))
    patches = patching.Patches()
    patches.replace(Target, "static", staticmethod(lambda: 0))
    patches.replace(Target, "made", classmethod(lambda cls: 0))
    patches.undo()
    assert vars(Target)["static"] is before["static"]
    assert vars(Target)["made"] is before["made"]
    assert (Target().static(), Target().made()) == (1, 2)


def test_a_replacement_a_live_stack_made_is_looked_through() -> None:
    """A stack started while another runs checks moto's attribute, not the first one's patch."""
    declared = _declared(f"{__name__}:_Target.method(self, value)")
    moto_s = _Target.method
    patches = patching.Patches()
    patches.replace(_Target, "method", lambda self: 0)
    try:
        assert patching.problem(declared) is None
    finally:
        patches.undo()
    assert _Target.method is moto_s
    assert patching.problem(declared) is None
