"""Reading template.yaml: CloudFormation tags and the few intrinsics the local stack needs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(name: str):  # type: ignore[no-untyped-def]
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if name == "Fn::GetAtt" and isinstance(value, str):
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        elif isinstance(node, yaml.MappingNode):
            value = loader.construct_mapping(node, deep=True)
        else:
            raise yaml.constructor.ConstructorError(
                None, None, f"unexpected {name} node", node.start_mark
            )
        return {name: value}

    return construct


_TAGS = {
    "!Ref": "Ref",
    "!GetAtt": "Fn::GetAtt",
    "!Sub": "Fn::Sub",
    "!If": "Fn::If",
    "!Join": "Fn::Join",
    "!Select": "Fn::Select",
    "!Split": "Fn::Split",
    "!Equals": "Fn::Equals",
    "!Not": "Fn::Not",
    "!And": "Fn::And",
    "!Or": "Fn::Or",
    "!FindInMap": "Fn::FindInMap",
    "!ImportValue": "Fn::ImportValue",
    "!GetAZs": "Fn::GetAZs",
    "!Base64": "Fn::Base64",
    "!Condition": "Condition",
}
for _short, _full in _TAGS.items():
    _CfnLoader.add_constructor(_short, _tag(_full))


def load_template(path: Path) -> dict[str, Any]:
    return load_template_text(path.read_text())


def load_template_text(text: str) -> dict[str, Any]:
    return yaml.load(text, Loader=_CfnLoader)


class _CfnDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # every node in full: no generated &id001 anchors to follow

    def choose_scalar_style(self) -> str:
        # A tagged scalar plain where YAML allows it (!Ref Auth, not !Ref 'Auth').
        event = self.event
        if (
            isinstance(event, yaml.ScalarEvent)
            and (event.tag or "").startswith("!")
            and not event.style
        ):
            analysis = self.analysis = self.analysis or self.analyze_scalar(event.value)
            plain = analysis.allow_flow_plain if self.flow_level else analysis.allow_block_plain
            if plain and not analysis.empty and not analysis.multiline:
                return ""
        return str(super().choose_scalar_style())


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    if len(data) == 1:
        ((key, arg),) = data.items()
        tag = _SHORT_TAGS.get(key)
        if key == "Fn::GetAtt" and isinstance(arg, list) and all(isinstance(a, str) for a in arg):
            return dumper.represent_scalar("!GetAtt", ".".join(arg))
        if tag is not None and (key != "Condition" or isinstance(arg, str)):
            if isinstance(arg, list):
                return dumper.represent_sequence(tag, arg, flow_style=_flat(arg) or None)
            if isinstance(arg, dict):
                return dumper.represent_mapping(tag, arg)
            return dumper.represent_scalar(tag, str(arg))
    return dumper.represent_dict(data)


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    # A list of scalars on one line ([a, b]), as the template writes them.
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=_flat(data) or None)


def _flat(data: list[Any], room: int = 8) -> bool:
    """Whether a list goes on one line: its items scalars, or intrinsics of such, a few."""

    def leaves(value: Any) -> int:
        if isinstance(value, str | int | float | bool):
            return 1 if "\n" not in str(value) else 99
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key in _SHORT_TAGS:
                return leaves(arg)
        if isinstance(value, list):
            return sum(leaves(v) for v in value)
        return 99

    return leaves(data) <= room


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data.strip("\n") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_SHORT_TAGS = {full: short for short, full in _TAGS.items()}
_CfnDumper.add_representer(dict, _represent_dict)
_CfnDumper.add_representer(str, _represent_str)
_CfnDumper.add_representer(list, _represent_list)


def dump_template(template: dict[str, Any]) -> str:
    """`template` as YAML with the short intrinsic tags (!Ref, !Sub, ...), keys in order."""
    return yaml.dump(template, Dumper=_CfnDumper, sort_keys=False, width=10_000, allow_unicode=True)


# The Mappings entry that holds a template's settings (the scaffold's template): values a
# deployment does not ask for, read with Fn::FindInMap [Settings, Values, NAME].
SETTINGS_MAP, SETTINGS_KEY = "Settings", "Values"


def template_settings(template: dict[str, Any]) -> dict[str, str]:
    """The template's settings as parameter values (strings; a list comma-joined)."""
    values = (template.get("Mappings") or {}).get(SETTINGS_MAP, {}).get(SETTINGS_KEY, {})
    return {
        name: ",".join(map(str, value)) if isinstance(value, list) else str(value)
        for name, value in values.items()
    }


def with_settings(mappings: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """`mappings` with the settings that `values` names set to its values: a setting is
    overridden like a parameter (`dev --param NAME=VALUE`, LocalStack(parameters=...))."""
    settings = (mappings.get(SETTINGS_MAP) or {}).get(SETTINGS_KEY)
    if not settings:
        return mappings
    changed = dict(settings)
    for name, old in settings.items():
        if name in values:
            changed[name] = values[name].split(",") if isinstance(old, list) else values[name]
    return {
        **mappings,
        SETTINGS_MAP: {**mappings[SETTINGS_MAP], SETTINGS_KEY: changed},
    }


_SUB = re.compile(r"\$\{([^}!]+)\}")


class _NoValue:
    """`Ref: AWS::NoValue`: the property (or list item) it is the value of is dropped."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE: Any = _NoValue()


@dataclass
class Resolver:
    """Resolves Ref / GetAtt / Sub / Join / Split / FindInMap and the condition functions (If,
    Equals, Not, And, Or, Condition) against parameters, the template's Conditions and Mappings
    and known local resource values. `Ref: AWS::NoValue` drops the key or list item holding it,
    as CloudFormation does.
    """

    parameters: dict[str, str]
    refs: dict[str, str]
    attributes: dict[str, str]
    # The template's Conditions section (name -> condition function), evaluated on demand.
    conditions: dict[str, Any] = field(default_factory=dict)
    # The template's Mappings section (settings overridden: with_settings).
    mappings: dict[str, Any] = field(default_factory=dict)
    _evaluated: dict[str, bool] = field(default_factory=dict, init=False, repr=False)
    _evaluating: set[str] = field(default_factory=set, init=False, repr=False)

    def resolve(self, value: Any) -> Any:
        resolved = self._resolve(value)
        return None if resolved is NO_VALUE else resolved

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Ref":
                    return NO_VALUE if arg == "AWS::NoValue" else self._ref(arg)
                if key == "Fn::GetAtt":
                    return self._getatt(arg if isinstance(arg, list) else arg.split(".", 1))
                if key == "Fn::Sub":
                    return self._sub(arg)
                if key == "Fn::FindInMap":
                    return self._find_in_map(arg)
                if key == "Fn::Split":
                    sep, text = arg
                    return str(self.resolve(text)).split(sep)
                if key == "Fn::Join":
                    sep, items = arg
                    if not isinstance(items, list):
                        # A list from an intrinsic: a CommaDelimitedList parameter (its value
                        # as given, comma-separated), a Split.
                        items = self.resolve(items)
                        items = items.split(",") if isinstance(items, str) else items
                    return sep.join(str(self.resolve(i)) for i in items)
                if key == "Fn::If":
                    # Only the chosen branch is resolved: the other may name what this
                    # configuration does not have (a resource left out by its condition).
                    name, when_true, when_false = arg
                    return self._resolve(when_true if self.condition(name) else when_false)
                if key in ("Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or", "Condition"):
                    return self._evaluate(value)
            resolved = {k: self._resolve(v) for k, v in value.items()}
            return {k: v for k, v in resolved.items() if v is not NO_VALUE}
        if isinstance(value, list):
            items = [self._resolve(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        return value

    def condition(self, name: str) -> bool:
        """The value of the template's condition `name` for these parameters."""
        if name not in self._evaluated:
            if name not in self.conditions:
                raise KeyError(f"no condition {name} in the template")
            if name in self._evaluating:
                raise ValueError(f"condition {name} refers to itself")
            self._evaluating.add(name)
            try:
                self._evaluated[name] = self._evaluate(self.conditions[name])
            finally:
                self._evaluating.discard(name)
        return self._evaluated[name]

    def _evaluate(self, value: Any) -> bool:
        """A condition function (Fn::Equals/Not/And/Or or Condition) as a boolean."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError(f"not a condition: {value!r}")
        ((key, arg),) = value.items()
        if key == "Condition":
            return self.condition(arg)
        if key == "Fn::Equals":
            left, right = (self.resolve(v) for v in arg)
            return _scalar(left) == _scalar(right)
        if key == "Fn::Not":
            (inner,) = arg
            return not self._evaluate(inner)
        if key == "Fn::And":
            return all(self._evaluate(v) for v in arg)
        if key == "Fn::Or":
            return any(self._evaluate(v) for v in arg)
        if key == "Fn::If":  # allowed inside a condition: the chosen branch's condition
            return self._evaluate(self._resolve(value))
        raise ValueError(f"not a condition function: {key}")

    def _ref(self, name: str) -> str:
        if name in self.parameters:
            return self.parameters[name]
        if name in self.refs:
            return self.refs[name]
        pseudo = {
            "AWS::Region": self.parameters.get("AWS::Region", "us-east-1"),
            "AWS::AccountId": self.parameters.get("AWS::AccountId", "123456789012"),
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "a2a-serverless-local",
        }
        if name in pseudo:
            return pseudo[name]
        raise KeyError(f"cannot resolve Ref {name} locally")

    def _find_in_map(self, arg: list[Any]) -> Any:
        name, top, second = (self.resolve(a) for a in arg[:3])
        try:
            return self.mappings[name][top][second]
        except KeyError:
            if len(arg) > 3 and "DefaultValue" in arg[3]:  # AWS::LanguageExtensions
                return self._resolve(arg[3]["DefaultValue"])
            raise KeyError(f"no mapping value {name}/{top}/{second} in the template") from None

    def _getatt(self, parts: list[str]) -> str:
        key = ".".join(parts)
        if key in self.attributes:
            return self.attributes[key]
        raise KeyError(f"cannot resolve GetAtt {key} locally")

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            template, variables = arg
            variables = {k: self.resolve(v) for k, v in variables.items()}
        else:
            template, variables = arg, {}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:
                return self._getatt(name.split(".", 1))
            return self._ref(name)

        return _SUB.sub(replace, template)


def _scalar(value: Any) -> Any:
    """CloudFormation compares parameter values as strings (a Number parameter too)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return value


def parameter_defaults(template: dict[str, Any]) -> dict[str, str]:
    return {
        name: str(spec["Default"])
        for name, spec in template.get("Parameters", {}).items()
        if "Default" in spec
    }
