"""Reading template.yaml: CloudFormation tags and the few intrinsics the local stack needs."""

from __future__ import annotations

import re
from dataclasses import dataclass
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


for _short, _full in {
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
}.items():
    _CfnLoader.add_constructor(_short, _tag(_full))


def load_template(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_CfnLoader)


_SUB = re.compile(r"\$\{([^}!]+)\}")


@dataclass
class Resolver:
    """Resolves Ref / GetAtt / Sub against parameters and known local resource values."""

    parameters: dict[str, str]
    refs: dict[str, str]
    attributes: dict[str, str]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Ref":
                    return self._ref(arg)
                if key == "Fn::GetAtt":
                    return self._getatt(arg if isinstance(arg, list) else arg.split(".", 1))
                if key == "Fn::Sub":
                    return self._sub(arg)
                if key == "Fn::Join":
                    sep, items = arg
                    return sep.join(str(self.resolve(i)) for i in items)
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

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


def parameter_defaults(template: dict[str, Any]) -> dict[str, str]:
    return {
        name: str(spec["Default"])
        for name, spec in template.get("Parameters", {}).items()
        if "Default" in spec
    }
