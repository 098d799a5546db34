"""IAM proven from observed calls: what the local stack recorded (local/calls.py) evaluated
against each principal's role in the translated template, with moto's policy evaluator.

- A call is allowed when one of the principal's policies allows the action on the resource
  and none denies it: its role's inline policies, the template's policies attached to the role
  by their `Roles` (FlowPolicy, BedrockInvokePolicy...: when their Condition holds for the
  stack's parameters) and the AWS managed policies SAM attaches (embedded below; a conditional
  one resolved for the stack). A statement's Condition is judged on the condition keys the
  recorder gives a call (`dynamodb:LeadingKeys`); one it cannot judge allows nothing. Anything
  else, and any call the recorder could not map, is a violation. Except
  in a stack whose environment names resources away from the template's (`overrides`: a
  test's deliberate misconfiguration, e.g. a missing retry queue): its denied calls are
  listed as tolerated, not failures.
- A grant (action, resource of an inline policy statement) that no observed call of the
  principal used is reported as unused; grants of services whose calls are not recorded
  (CloudWatch Logs, X-Ray: the platform's calls, not the code's) are listed apart.

The policies' intrinsics (Fn::GetAtt TasksTable.Arn, Fn::Sub "${TasksTable.Arn}/index/*",
Ref FlowStateMachine, ...) are resolved with the values the recording stack created.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from moto.iam.access_control import IAMPolicyStatement, PermissionResult

from a2a_serverless.local.template import Resolver
from tests.template.sam import as_list, load_sam, resource_key, role_of, translate

# The AWS managed policies SAM attaches, as documented in the AWS Managed Policy Reference
# (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/<name>.html, the JSON
# policy document of each default version). Only their dynamodb/sqs actions matter here:
# logs and X-Ray calls are not recorded.
_LOGS = ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"]
MANAGED_POLICIES: dict[str, dict[str, Any]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": _LOGS, "Resource": "*"}],
    },
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "xray:GetSamplingRules",
                    "xray:GetSamplingTargets",
                    "xray:GetSamplingStatisticSummaries",
                ],
                "Resource": ["*"],
            }
        ],
    },
    # Lambda's DynamoDB stream poller uses the function's role.
    "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                    "dynamodb:ListStreams",
                    *_LOGS,
                ],
                "Resource": "*",
            }
        ],
    },
    # Lambda's SQS poller uses the function's role.
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                    *_LOGS,
                ],
                "Resource": "*",
            }
        ],
    },
}


# -- the recorded log --------------------------------------------------------------------------


Context = tuple[tuple[str, tuple[str, ...]], ...]  # condition key -> values, hashable


def as_context(values: dict[str, list[str]] | None) -> Context:
    return tuple((key, tuple(v)) for key, v in sorted((values or {}).items()))


@dataclass(frozen=True)
class Call:
    principal: str
    action: str
    resource: str
    operation: str = ""
    # The condition keys the recorder knew (`dynamodb:LeadingKeys`: the partition key).
    context: Context = ()
    # Where it was first seen (pytest's current test, the thread): help, not identity.
    test: str | None = field(default=None, compare=False)
    thread: str = field(default="", compare=False)

    @property
    def condition_keys(self) -> dict[str, list[str]]:
        return {key: list(values) for key, values in self.context}


@dataclass
class CallLog:
    stacks: dict[str, dict[str, Any]] = field(default_factory=dict)  # stack id -> resources
    calls: dict[tuple[str, Call], None] = field(default_factory=dict)  # (stack id, call)
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.calls and not self.errors


def read_log(path: Path) -> CallLog:
    log = CallLog()
    if not path.exists():
        return log
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        kind = entry.pop("kind")
        stack = entry.pop("stack")
        if kind == "stack":
            log.stacks[stack] = entry
        elif kind == "call":
            entry["context"] = as_context(entry.get("context"))
            log.calls[(stack, Call(**entry))] = None
        elif kind == "error":
            log.errors.append(entry)
        else:
            raise ValueError(f"unknown call log line: {line}")
    return log


# Action prefixes of the calls local/calls.py records (the last three: what flows call).
RECORDED_SERVICES = {"dynamodb", "sqs", "states", "lambda", "s3", "secretsmanager", "bedrock"}


def observable(action: str) -> bool:
    return action.split(":", 1)[0] in RECORDED_SERVICES


# -- the roles -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """One action on one resource of a policy statement (the role's inline policies and the
    template's policies attached to it), as the template writes it."""

    policy: str
    action: str
    key: str  # the resource, as tests/template/sam.py `resource_key` writes it
    resource: Any = field(compare=False)  # a string or an intrinsic
    # The template condition the policy exists under (an attached policy's), if any.
    condition: str | None = field(default=None, compare=False)


# Policy resources of the template that attach themselves to roles (their `Roles`).
ATTACHED_POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")


class Roles:
    """The role of every Lambda function and state machine of the translated template."""

    def __init__(self, cfn: dict[str, Any]) -> None:
        self.inline: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.managed: dict[str, list[Any]] = {}  # ARNs, or intrinsics giving one (or none)
        # Template policies attached by their Roles: (logical id, condition, document).
        self.attached: dict[str, list[tuple[str, str | None, dict[str, Any]]]] = {}
        for logical_id, resource in cfn["Resources"].items():
            if resource["Type"] not in (
                "AWS::Lambda::Function",
                "AWS::StepFunctions::StateMachine",
            ):
                continue
            role_id, role = role_of(cfn, logical_id)
            props = role["Properties"]
            self.inline[logical_id] = [
                (p["PolicyName"], p["PolicyDocument"]) for p in props.get("Policies", [])
            ]
            self.managed[logical_id] = list(props.get("ManagedPolicyArns", []))
            self.attached[logical_id] = [
                (policy_id, policy.get("Condition"), policy["Properties"]["PolicyDocument"])
                for policy_id, policy in cfn["Resources"].items()
                if policy["Type"] in ATTACHED_POLICY_TYPES
                and {"Ref": role_id} in policy["Properties"].get("Roles", [])
            ]

    @property
    def principals(self) -> list[str]:
        return sorted(self.inline)

    def _documents(self, principal: str) -> list[tuple[str, str | None, dict[str, Any]]]:
        inline = [(name, None, document) for name, document in self.inline[principal]]
        return inline + self.attached[principal]

    def grants(self, principal: str) -> list[Grant]:
        found = []
        for name, condition, document in self._documents(principal):
            for statement in as_list(document["Statement"]):
                if statement.get("Effect") != "Allow":
                    continue
                for action in as_list(statement["Action"]):
                    for resource in as_list(statement["Resource"]):
                        found.append(
                            Grant(name, action, resource_key(resource), resource, condition)
                        )
        return found

    def documents(self, principal: str, resolver: Resolver) -> list[dict[str, Any]]:
        """The principal's policy documents with the stack's values substituted (statements
        of unrecorded services only, e.g. on log groups the local stack does not create, are
        left out when they name what it cannot resolve). Attached policies whose condition
        does not hold for the stack's parameters are left out."""
        documents = []
        for _, condition, document in self._documents(principal):
            if condition is not None and not resolver.condition(condition):
                continue
            kept = []
            for statement in as_list(document["Statement"]):
                try:
                    kept.append(resolver.resolve(statement))
                except KeyError:
                    if any(observable(a) for a in as_list(statement.get("Action", []))):
                        raise
            documents.append({"Statement": kept})
        for entry in self.managed[principal]:
            arn = resolver.resolve(entry)  # e.g. X-Ray's under TracesActive: an ARN, or none
            if arn is None:
                continue
            if arn not in MANAGED_POLICIES:
                raise KeyError(f"{principal}: managed policy {arn} is not embedded in iam_check")
            documents.append(MANAGED_POLICIES[arn])
        return documents


def resolver_for(resources: dict[str, Any], cfn: dict[str, Any] | None = None) -> Resolver:
    """The values a stack resolved the template's intrinsics to; with the template, its
    conditions for the stack's parameters too."""
    defaults = {
        name: str(spec["Default"])
        for name, spec in ((cfn or {}).get("Parameters") or {}).items()
        if "Default" in spec
    }
    return Resolver(
        {**defaults, **resources["parameters"]},
        dict(resources["refs"]),
        dict(resources["attributes"]),
        conditions=dict((cfn or {}).get("Conditions") or {}),
    )


# -- IAM's decision ------------------------------------------------------------------------------

# Condition keys the recorder gives the calls that have them (local/calls.py): a statement that
# tests one on a call without it cannot be judged, and allows nothing.
RECORDED_CONDITION_KEYS = {"dynamodb:LeadingKeys"}


def _wildcard(pattern: str) -> re.Pattern[str]:
    """An IAM `*`/`?` pattern (StringLike, ArnLike) as a regular expression."""
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    )


_OPERATORS = {
    "StringEquals": lambda value, expected: value == expected,
    "StringLike": lambda value, expected: bool(_wildcard(expected).fullmatch(value)),
    "ArnEquals": lambda value, expected: value == expected,
    "ArnLike": lambda value, expected: bool(_wildcard(expected).fullmatch(value)),
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike"}


def conditions_hold(condition: dict[str, Any], context: dict[str, list[str]]) -> bool:
    """Whether a statement's Condition holds for a request's condition keys: every operator,
    every key (AND); any expected value (OR). ForAllValues:/ForAnyValue: for multi-valued keys,
    ...IfExists for absent ones. An operator not judged here raises: extend the check."""
    for operator, tests in condition.items():
        qualifier, _, name = operator.rpartition(":")
        if_exists = name.endswith("IfExists")
        name = name.removesuffix("IfExists")
        negated = name in _NEGATED
        match = _OPERATORS.get(_NEGATED.get(name, name))
        if match is None or qualifier not in ("", "ForAllValues", "ForAnyValue"):
            raise ValueError(f"iam_check does not judge the condition operator {operator}")
        for key, expected in tests.items():
            expected = [str(e) for e in as_list(expected)]
            values = context.get(key)
            if values is None:
                if key in RECORDED_CONDITION_KEYS:
                    return False  # the recorder did not see it: cannot be judged
                if not (if_exists or qualifier == "ForAllValues"):
                    return False
                continue

            # Per value of the request: whether it matches one expected value (or none).
            matches = [any(match(v, e) for e in expected) != negated for v in values]
            if qualifier == "ForAnyValue":
                holds = any(matches)
            else:  # ForAllValues, or a single-valued key (every value it has)
                holds = all(matches) and (qualifier == "ForAllValues" or bool(matches))
            if not holds:
                return False
    return True


def _statement_result(
    statement: dict[str, Any], action: str, resource: str, context: dict[str, list[str]]
) -> PermissionResult:
    condition = statement.get("Condition")
    plain = {k: v for k, v in statement.items() if k != "Condition"}
    result = IAMPolicyStatement(plain).is_action_permitted(action, resource)
    if condition and result != PermissionResult.NEUTRAL and not conditions_hold(condition, context):
        return PermissionResult.NEUTRAL  # the statement does not apply to this request
    return result


def decide(
    documents: Iterable[dict[str, Any]],
    action: str,
    resource: str,
    context: dict[str, list[str]] | None = None,
) -> bool:
    """IAM's decision for one identity: an explicit deny wins, else any allow."""
    allowed = False
    for document in documents:
        for statement in as_list(document["Statement"]):
            result = _statement_result(statement, action, resource, context or {})
            if result == PermissionResult.DENIED:
                return False
            allowed = allowed or result == PermissionResult.PERMITTED
    return allowed


# -- evaluation ----------------------------------------------------------------------------------


@dataclass
class Report:
    denied: list[Call] = field(default_factory=list)
    tolerated: list[Call] = field(default_factory=list)  # denied, in a misconfigured stack
    errors: list[dict[str, Any]] = field(default_factory=list)
    observed: dict[str, set[Call]] = field(default_factory=dict)  # principal -> calls
    granted: dict[str, list[Grant]] = field(default_factory=dict)
    unused: dict[str, list[Grant]] = field(default_factory=dict)
    unobservable: dict[str, list[Grant]] = field(default_factory=dict)  # logs:, xray: ...

    @property
    def failed(self) -> bool:
        return bool(self.denied or self.errors)


def evaluate(log: CallLog, cfn: dict[str, Any]) -> Report:
    """The report of a call log against the translated template's roles."""
    roles = Roles(cfn)
    report = Report(errors=list(log.errors))
    used: set[tuple[str, Grant]] = set()
    resolvers = {stack: resolver_for(resources, cfn) for stack, resources in log.stacks.items()}

    @cache
    def documents(stack: str, principal: str) -> list[dict[str, Any]]:
        return roles.documents(principal, resolvers[stack])

    denied: dict[Call, None] = {}
    tolerated: dict[Call, None] = {}
    for stack, call in log.calls:
        plain = Call(call.principal, call.action, call.resource)
        report.observed.setdefault(call.principal, set()).add(plain)
        if call.principal not in roles.inline or stack not in resolvers:
            denied[call] = None  # no role to allow it (or a stack that never described itself)
            continue
        allowed = decide(
            documents(stack, call.principal), call.action, call.resource, call.condition_keys
        )
        if not allowed:
            if log.stacks[stack].get("overrides"):
                tolerated[call] = None
            else:
                denied[call] = None
        for grant in roles.grants(call.principal):
            if (call.principal, grant) in used or not observable(grant.action):
                continue
            if grant.condition is not None and not resolvers[stack].condition(grant.condition):
                continue
            statement = {
                "Effect": "Allow",
                "Action": grant.action,
                "Resource": resolvers[stack].resolve(grant.resource),
            }
            if decide([{"Statement": [statement]}], call.action, call.resource):
                used.add((call.principal, grant))
    report.denied = sorted(denied, key=lambda c: (c.principal, c.action, c.resource))
    report.tolerated = sorted(tolerated, key=lambda c: (c.principal, c.action, c.resource))

    def in_effect(grant: Grant) -> bool:  # in some stack of the log (its policy's condition)
        return grant.condition is None or any(
            r.condition(grant.condition) for r in resolvers.values()
        )

    for principal in roles.principals:
        grants = [g for g in roles.grants(principal) if in_effect(g)]
        report.granted[principal] = grants
        report.unused[principal] = [
            g for g in grants if observable(g.action) and (principal, g) not in used
        ]
        report.unobservable[principal] = [g for g in grants if not observable(g.action)]
    return report


def evaluate_file(path: Path, cfn: dict[str, Any] | None = None) -> Report | None:
    """The report of a call log, or None when nothing was recorded (e.g. only unit tests ran)."""
    log = read_log(path)
    if log.empty:
        return None
    return evaluate(log, cfn if cfn is not None else translate(load_sam()))


# -- output --------------------------------------------------------------------------------------


_VOLATILE = [
    (re.compile(r"(:execution:[^:]+):.*$"), r"\1:*"),  # one per task turn
    (re.compile(r"(/stream/).*$"), r"\1*"),  # one label per local stack
]


def generalized(resource: str) -> str:
    """An ARN with its per-run parts (execution names, stream labels) as `*`."""
    for pattern, replacement in _VOLATILE:
        resource = pattern.sub(replacement, resource)
    return resource


def _short(resource: str) -> str:
    """An ARN without its partition, region and account (the local ones)."""
    parts = resource.split(":", 5)
    return f"{parts[2]}:{parts[5]}" if len(parts) == 6 and parts[0] == "arn" else resource


def _observed(report: Report, principal: str) -> list[tuple[str, str]]:
    calls = report.observed.get(principal, set())
    return sorted({(c.action, generalized(c.resource)) for c in calls})


def format_report(report: Report) -> list[str]:
    lines = []
    for call in report.denied:
        lines.append(
            f"DENIED  {call.principal}: {call.action} on {call.resource} ({call.operation})"
            + (f" with {call.condition_keys}" if call.context else "")
            + (f" in {call.test} [{call.thread}]" if call.test else "")
        )
    for call in report.tolerated:
        lines.append(
            f"tolerated (stack with overridden resources)  {call.principal}: {call.action} "
            f"on {call.resource}"
        )
    for error in report.errors:
        lines.append(f"UNMAPPED  {error['principal']}: {error['operation']}: {error['error']}")
    for principal in sorted(report.granted):
        actions = sorted({g.action for g in report.granted[principal]})
        lines.append(f"{principal}  (granted: {', '.join(actions) or 'nothing'})")
        for action, resource in _observed(report, principal):
            lines.append(f"    used    {action} {_short(resource)}")
        for grant in report.unused[principal]:
            lines.append(f"    UNUSED  {grant.action} on {grant.key}  [{grant.policy}]")
        if report.unobservable[principal]:
            actions = sorted({g.action for g in report.unobservable[principal]})
            lines.append(f"    (not recorded: {', '.join(actions)})")
    return lines


def to_json(report: Report) -> dict[str, Any]:
    return {
        "failed": report.failed,
        "denied": [vars(c) for c in report.denied],
        "tolerated": [vars(c) for c in report.tolerated],
        "unmapped": report.errors,
        "principals": {
            principal: {
                # Per-run ARN parts (execution names, stream labels) as "*".
                "observed": [
                    {"action": action, "resource": resource}
                    for action, resource in _observed(report, principal)
                ],
                "granted": [
                    {"policy": g.policy, "action": g.action, "resource": g.resource}
                    for g in report.granted[principal]
                ],
                "unused": [
                    {"policy": g.policy, "action": g.action, "resource": g.resource}
                    for g in report.unused[principal]
                ],
                "not_recorded": sorted({g.action for g in report.unobservable[principal]}),
            }
            for principal in sorted(report.granted)
        },
    }
