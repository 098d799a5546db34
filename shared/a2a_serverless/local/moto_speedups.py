"""Where moto does more work than the answer needs: speed-ups for the local stack.

Each speed-up replaces moto (or botocore) attributes for the stack's life and answers as moto
does. At start the stack applies those `A2A_LOCAL_SPEEDUPS` asks for (`chosen`) whose
attributes moto still has in the shape they were written against (`apply`); the others are
skipped with a warning. Correctness fixes are in moto_fidelity.
"""

from __future__ import annotations

import copy
import json
import logging
import operator
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from a2a_serverless.local import patching
from a2a_serverless.local.patching import DYNAMODB_LOCK, Patch, Patches, patch, problem

ENV = "A2A_LOCAL_SPEEDUPS"
logger = logging.getLogger(__name__)


class _CopyModule:
    """A moto module's `copy`, but `deepcopy` of what `skip` picks gives `kept(value)`."""

    def __init__(self, skip: Callable[[Any], bool], kept: Callable[[Any], Any]) -> None:
        self._skip = skip
        self._kept = kept

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        return self._kept(value) if self._skip(value) else copy.deepcopy(value, memo)


@patch(
    "botocore.endpoint:Endpoint.make_request(self, operation_model, request_dict)",
    "moto.dynamodb.responses:DynamoHandler.dispatch",
    "moto.core.request:normalize_request",
    "moto.core.models:botocore_stubber",
    reimplements=True,
)
def direct_dynamodb_calls(patches: Patches) -> None:
    """moto routes a DynamoDB call through botocore's signing, retries and events and its own
    matching of every service's URLs. The serialized request goes straight to moto's DynamoDB
    handler, under the DynamoDB lock, and back through botocore's parser."""
    from botocore.awsrequest import AWSResponse, create_request_object
    from botocore.endpoint import Endpoint, convert_to_response_dict
    from moto.core.botocore_stubber import MockRawResponse
    from moto.core.exceptions import HTTPException
    from moto.core.models import botocore_stubber
    from moto.core.request import normalize_request
    from moto.dynamodb.responses import DynamoHandler
    from moto.dynamodb.urls import url_bases

    original = Endpoint.make_request
    moto_urls = [re.compile(base) for base in url_bases]

    def make_request(endpoint: Any, operation_model: Any, request_dict: dict[str, Any]) -> Any:
        service = operation_model.service_model
        if (
            service.service_name != "dynamodb"
            or not botocore_stubber.enabled
            or not any(pattern.match(request_dict["url"]) for pattern in moto_urls)
        ):
            return original(endpoint, operation_model, request_dict)
        prepared = endpoint.prepare_request(create_request_object(request_dict))
        request = normalize_request(prepared)
        with DYNAMODB_LOCK:
            try:
                status, headers, body = DynamoHandler.dispatch(
                    request, request.raw_url, request.headers
                )
            except HTTPException as error:  # as moto's stubber answers them
                status, headers, body = error.code, error.get_headers(), error.get_body()
        http = AWSResponse(prepared.url, status, headers, MockRawResponse(body))
        response = convert_to_response_dict(http, operation_model)
        parser = endpoint._response_parser_factory.create_parser(service.resolved_protocol)
        parsed = parser.parse(response, operation_model.output_shape)
        if status >= 300:
            endpoint._add_modeled_error_fields(response, parsed, operation_model, parser)
        return http, parsed

    patches.replace(Endpoint, "make_request", make_request)


@patch(
    "moto.dynamodb.responses:DynamoHandler.parse_parameters(self, request)",
    "moto.core.utils:get_service_model",
    reimplements=True,
)
def dynamodb_bodies_read_once(patches: Patches) -> None:
    """moto reads a DynamoDB body with `json.loads`, then walks it along the input shape to
    convert blobs, timestamps and floats. A body naming none of those keeps what it read."""
    from moto.core.utils import get_service_model
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.parse_parameters
    markers: dict[str, tuple[str, ...] | None] = {}  # operation -> '"name"' it must not hold

    def markers_of(action: str) -> tuple[str, ...] | None:
        if action not in markers:
            try:
                shape = get_service_model("dynamodb").operation_model(action).input_shape
            except Exception:  # moto's own path answers an unknown action
                shape = None
            markers[action] = (
                None
                if shape is None
                else tuple(f'"{name}"' for name in sorted(_converted_members(shape)))
            )
        return markers[action]

    def parse_parameters(self: Any, request: Any) -> None:
        found = markers_of(self._get_action())
        body = request.data
        if found is not None and body:
            text = body.decode() if isinstance(body, bytes) else body
            if not any(marker in text for marker in found):
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict):
                    self.params = parsed
                    return
        original(self, request)

    patches.replace(DynamoHandler, "parse_parameters", parse_parameters)


def _converted_members(shape: Any) -> set[str]:
    """The wire names of the members, anywhere below `shape`, whose values moto's JSON parser
    converts rather than copies: blobs (base64), timestamps, floats, and lists or maps of
    them (a list of blobs is `BS`)."""
    names: set[str] = set()
    seen: set[str] = set()  # structures walked (an attribute value holds attribute values)

    def converts(member: Any) -> bool:
        if member.type_name == "list":
            return converts(member.member)
        if member.type_name == "map":
            return converts(member.key) or converts(member.value)
        return member.type_name in ("blob", "timestamp", "float", "double")

    def walk(member: Any) -> None:
        if member.type_name == "list":
            walk(member.member)
        elif member.type_name == "map":
            walk(member.value)
        elif member.type_name == "structure" and not member.is_document_type:
            if member.name in seen:
                return
            seen.add(member.name)
            for name, child in member.members.items():
                if converts(child):
                    names.add(child.serialization.get("name", name))
                walk(child)

    walk(shape)
    return names


@patch(
    "moto.dynamodb.comparisons:ConditionExpressionParser.parse(self)",
)
def parsed_conditions_kept(patches: Patches) -> None:
    """moto parses a condition expression afresh at every use (validation, check, each check of a
    transaction). Each parse is kept, by its expression and the names and values it can name."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    original = ConditionExpressionParser.parse
    kept: dict[str, tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}
    limit, largest = 4096, 4096

    def parse(parser: Any) -> Any:
        expression = parser.condition_expression
        if not expression:
            return original(parser)
        # Keyed only by the placeholders the expression can name: the parse looks up no others,
        # and keying on all values would cost more than the parse.
        names = parser.expression_attribute_names or {}  # None and {} parse alike
        values = parser.expression_attribute_values or {}
        key = json.dumps(
            [
                expression,
                {name: names[name] for name in names if name in expression},
                {name: values[name] for name in values if name in expression},
            ],
            sort_keys=True,
            default=repr,
        )
        found = kept.get(key)
        if found is None:
            parsed = original(parser)
            if len(key) > largest:
                return parsed
            if len(kept) >= limit:
                kept.pop(next(iter(kept)))
            kept[key] = (
                parsed,
                tuple(parser.expr_attr_names_found),
                tuple(parser.expr_attr_values_found),
            )
            return parsed
        parsed, names_found, values_found = found
        parser.expr_attr_names_found.extend(names_found)
        parser.expr_attr_values_found.extend(values_found)
        return parsed

    patches.replace(ConditionExpressionParser, "parse", parse)


@patch(
    "moto.dynamodb.parsing.expressions:UpdateExpressionParser.make(expression_str)",
    "moto.dynamodb.parsing.validators:deepcopy(x, memo, _nil)",
)
def parsed_update_expressions_kept(patches: Patches) -> None:
    """moto parses an update expression on every UpdateItem, and its validator deep-copies the tree.
    Each tree is parsed once and copied from its pickle."""
    import pickle

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    original_make = UpdateExpressionParser.make.__func__
    kept: dict[str, Any] = {}  # expression -> its tree
    pickled: dict[int, tuple[Any, bytes]] = {}  # id(tree) -> (tree, its pickle)
    limit = 512  # distinct expressions: a stack has a few dozen

    def make(cls: Any, expression: str) -> Any:
        tree = kept.get(expression)
        if tree is None:
            tree = original_make(cls, expression)
            if len(kept) >= limit:
                pickled.pop(id(kept.pop(next(iter(kept)))), None)
            kept[expression] = tree
            pickled[id(tree)] = (tree, pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL))
        return tree

    def deepcopy(value: Any, memo: Any = None) -> Any:
        found = pickled.get(id(value))
        if found is not None and found[0] is value and memo is None:
            return pickle.loads(found[1])
        return copy.deepcopy(value, memo)

    patches.replace(UpdateExpressionParser, "make", classmethod(make))
    patches.replace(validators, "deepcopy", deepcopy)


@patch(
    "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser._processing_map(self)",
    "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.nodes_to_be_processed(self)",
    "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.process(self, node)",
    "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.traverse(self, node)",
    "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.traverse_node_recursively(self, node, "
    "child_id)",
    "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.pre_processing_of_child",
    reimplements=True,
)
def processing_maps_kept(patches: Patches) -> None:
    """moto's update-expression traversers rebuild their node-type map, and test each node against
    its classes, at every node. The map is built once per traverser, the match once per class."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser  # type: ignore[attr-defined]

    def processing_map(traverser: Any) -> dict[type, Callable[[Any], Any]]:
        found: dict[type, Callable[[Any], Any]] | None = traverser.__dict__.get("_a2a_map")
        if found is None:
            found = traverser.__dict__["_a2a_map"] = traverser._processing_map()
        return found

    def nodes_to_be_processed(traverser: Any) -> tuple[type, ...]:
        types: tuple[type, ...] | None = traverser.__dict__.get("_a2a_types")
        if types is None:
            types = traverser.__dict__["_a2a_types"] = tuple(processing_map(traverser))
        return types

    def process(traverser: Any, node: Any) -> Any:
        for class_key, processor in processing_map(traverser).items():
            if isinstance(node, class_key):
                return processor(node)
        return None

    # moto's walk asks the slow ABC `isinstance` at every node, though the answer depends only
    # on the node's class: `traverse` caches it per (traverser class, node class) and walks as
    # `traverse_node_recursively` does; a traverser with its own walk keeps moto's.
    from moto.dynamodb.parsing.ast_nodes import Node  # type: ignore[attr-defined]

    original_walk = DepthFirstTraverser.traverse_node_recursively
    default_pre = DepthFirstTraverser.pre_processing_of_child
    class_keys: dict[type, tuple[type, ...]] = {}  # traverser class -> its map's keys
    # traverser class -> node class -> the map key processing it (None: none; absent from
    # the inner dict: not yet seen); `_NOT_A_NODE` for values that are no Node at all.
    keys_for: dict[type, dict[type, Any]] = {}

    def traverse(traverser: Any, root: Any) -> Any:
        cls = type(traverser)
        keys = nodes_to_be_processed(traverser)
        if (
            cls.traverse_node_recursively is not original_walk
            or cls.process is not process
            or cls.nodes_to_be_processed is not nodes_to_be_processed
            or class_keys.setdefault(cls, keys) != keys
        ):
            return traverser.traverse_node_recursively(root)
        methods = processing_map(traverser)
        pre = (
            None
            if cls.pre_processing_of_child is default_pre
            else traverser.pre_processing_of_child
        )
        known = keys_for.setdefault(cls, {})

        def walk(node: Any, child_id: int) -> Any:
            node_type = type(node)
            key = known.get(node_type, _UNSEEN)
            if key is _UNSEEN:
                if isinstance(node, Node):
                    key = next((k for k in keys if isinstance(node, k)), None)
                else:
                    key = _NOT_A_NODE
                known[node_type] = key
            if key is _NOT_A_NODE:
                return node
            parent_node = node.parent
            if node.children is not None:
                for i, child_node in enumerate(node.children):
                    if pre is not None:
                        pre(node, i)
                    walk(child_node, i)
            if key is not None:
                node = methods[key](node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
            return node

        return walk(root, -1)

    patches.replace(DepthFirstTraverser, "nodes_to_be_processed", nodes_to_be_processed)
    patches.replace(DepthFirstTraverser, "process", process)
    patches.replace(DepthFirstTraverser, "traverse", traverse)


_UNSEEN = object()

_NOT_A_NODE = object()


@patch(
    "moto.dynamodb.parsing.expressions:UpdateExpressionParser.make(expression_str)",
    "moto.dynamodb.models:UpdateExpressionValidator(expression, expression_attribute_names, "
    "expression_attribute_values, item, table)",
    "moto.dynamodb.models:UpdateExpressionExecutor(update_ast, item, expression_attribute_names)",
    "moto.dynamodb.models.utilities:bytesize",
    "moto.dynamodb.parsing.reserved_keywords:ReservedKeywords.get_reserved_keywords",
    reimplements=True,
)
def planned_updates(patches: Patches) -> None:
    """moto validates an update expression with ten tree walks, then executes it with another. An
    update of the store's simple shape (`update_plan`) that no validator could refuse applies a
    plan made once per expression; any other goes to moto's validator and executor."""
    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.utilities import bytesize
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
    from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords

    moto_validator = dynamodb_models.UpdateExpressionValidator
    moto_executor = dynamodb_models.UpdateExpressionExecutor
    make = UpdateExpressionParser.make.__func__
    reserved = {word.upper() for word in ReservedKeywords.get_reserved_keywords()}
    plans: dict[int, tuple[Any, _Plan | None]] = {}  # id(tree) -> (tree, its plan)
    item_size_limit = 405_000  # moto's (LimitedSizeDict), checked at every attribute set

    def planned_make(cls: Any, expression: str) -> Any:
        tree = make(cls, expression)
        if id(tree) not in plans:
            if len(plans) >= 512:
                plans.pop(next(iter(plans)))
            plans[id(tree)] = (tree, update_plan(expression))
        return tree

    class Planned:
        """A validated plan: what moto's validator returns, for `PlannedExecutor`."""

        def __init__(self, changes: list[tuple[str, Any]]) -> None:
            self.changes = changes

        def normalize(self) -> None:
            """The targets are distinct top-level attributes: their order changes nothing."""

    def resolved(token: str, names: Mapping[str, str]) -> str | None:
        if token.startswith("#"):
            return names.get(token)
        return None if token.upper() in reserved else token

    def changes_of(
        plan: _Plan, names: Mapping[str, str], values: Mapping[str, Any], item: Any, table: Any
    ) -> list[tuple[str, Any]] | None:
        """The plan's changes to `item`, or None where moto is to decide."""
        attrs = item.attrs
        keys = set(table.table_key_attrs)
        defined = {d["AttributeName"]: d["AttributeType"] for d in table.attr}
        indexed = set(table.attribute_keys)
        changes: list[tuple[str, Any]] = []
        growth = 0
        for op, token, operand in plan:
            target = resolved(token, names)
            if target is None or target in keys or any(target == c[0] for c in changes):
                return None
            if op == "remove":
                changes.append((target, None))
                continue
            value_token = operand if op == "add" else operand[-1]
            if value_token not in values:
                return None
            value = DynamoType(values[value_token])
            if op == "add":
                current = attrs.get(target)
                if value.type != "N" or (current is not None and current.type != "N"):
                    return None
                value = (current if current is not None else DynamoType({"N": "0"})) + value
            elif operand[0] == "if_not_exists":
                path = resolved(operand[1], names)
                if path is None:
                    return None
                value = attrs.get(path, value)
            for name in {token, target}:  # moto compares the token as written, AWS the name
                if name in defined and defined[name] != value.type:
                    return None
                if name in indexed and value.type in ("S", "B") and not value.value:
                    return None
            changes.append((target, value))
            growth += bytesize(target) + value.size()
        if growth and item.size() + growth > item_size_limit:
            return None  # moto's check at each set decides when and where it refuses
        return changes

    class PlannedValidator:
        def __init__(
            self,
            expression: Any,
            expression_attribute_names: Any,
            expression_attribute_values: Any,
            item: Any,
            table: Any,
        ) -> None:
            self.arguments = (
                expression,
                expression_attribute_names,
                expression_attribute_values,
                item,
                table,
            )

        def validate(self) -> Any:
            expression, names, values, item, table = self.arguments
            found = plans.get(id(expression))
            if found is not None and found[0] is expression and found[1] is not None:
                try:
                    changes = changes_of(found[1], names or {}, values or {}, item, table)
                except Exception:  # anything unexpected: moto decides
                    changes = None
                if changes is not None:
                    return Planned(changes)
            return moto_validator(
                expression,
                expression_attribute_names=names,
                expression_attribute_values=values,
                item=item,
                table=table,
            ).validate()

    class PlannedExecutor:
        def __init__(self, update_ast: Any, item: Any, expression_attribute_names: Any) -> None:
            self.arguments = (update_ast, item, expression_attribute_names)

        def execute(self) -> None:
            validated, item, names = self.arguments
            if not isinstance(validated, Planned):
                moto_executor(validated, item, names).execute()
                return
            for target, value in validated.changes:
                if value is None:
                    item.attrs.pop(target, None)
                else:
                    dict.__setitem__(item.attrs, target, value)  # its size was checked

    patches.replace(UpdateExpressionParser, "make", classmethod(planned_make))
    patches.replace(dynamodb_models, "UpdateExpressionValidator", PlannedValidator)
    patches.replace(dynamodb_models, "UpdateExpressionExecutor", PlannedExecutor)


# An update expression the store writes: top-level attributes only, each clause once.
_UPDATE_TOKEN = re.compile(
    r"\s*(?:(?P<name>#[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*)|(?P<value>:[A-Za-z0-9_]+)"
    r"|(?P<punct>[=,()]))"
)

_CLAUSES = ("SET", "ADD", "REMOVE")

# A plan's actions: (op, target, operand). SET operands are ("value", ":v") or
# ("if_not_exists", path, ":v"); ADD's is ":v"; REMOVE's None.
_Plan = tuple[tuple[str, str, Any], ...]


def update_plan(expression: str) -> _Plan | None:
    """The actions of an update expression of the simple shape the store writes (`SET a = :v`,
    `SET a = if_not_exists(b, :v)`, `ADD a :n`, `REMOVE a`, names plain or `#placeholder`, each
    clause at most once), in the order written; None for any other shape (nested paths,
    arithmetic, list_append, DELETE, ...)."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(expression):
        if expression[position:].isspace():
            break
        match = _UPDATE_TOKEN.match(expression, position)
        if match is None:
            return None
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    actions: list[tuple[str, str, Any]] = []
    seen: set[str] = set()
    at = 0

    def take(kind: str, text: str | None = None) -> str | None:
        nonlocal at
        if at < len(tokens) and tokens[at][0] == kind and text in (None, tokens[at][1]):
            at += 1
            return tokens[at - 1][1]
        return None

    while at < len(tokens):
        clause = (take("name") or "").upper()
        if clause not in _CLAUSES or clause in seen:
            return None
        seen.add(clause)
        while True:
            target = take("name")
            if target is None or target.upper() in _CLAUSES:
                return None
            if clause == "REMOVE":
                actions.append(("remove", target, None))
            elif clause == "ADD":
                value = take("value")
                if value is None:
                    return None
                actions.append(("add", target, value))
            else:
                if take("punct", "=") is None:
                    return None
                value = take("value")
                if value is not None:
                    actions.append(("set", target, ("value", value)))
                else:
                    function = take("name")
                    if function != "if_not_exists" or take("punct", "(") is None:
                        return None
                    path, comma = take("name"), take("punct", ",")
                    value, close = take("value"), take("punct", ")")
                    if None in (path, comma, value, close):
                        return None
                    actions.append(("set", target, ("if_not_exists", path, value)))
            if take("punct", ",") is None:
                break
    return tuple(actions) or None


@patch(
    "moto.core.responses:method_names_from_class(clazz)",
)
def handler_methods_kept(patches: Patches) -> None:
    """moto lists every function of a response class (`inspect.getmembers`) on every call. Each
    class's list is kept."""
    from moto.core import responses

    original = responses.method_names_from_class
    listed: dict[Any, list[str]] = {}

    def method_names_from_class(clazz: Any) -> list[str]:
        names = listed.get(clazz)
        if names is None:
            names = listed[clazz] = original(clazz)
        return names

    patches.replace(responses, "method_names_from_class", method_names_from_class)


@patch(
    "moto.dynamodb.models:copy",
    "moto.dynamodb.models:DynamoDBBackend.transact_write_items(self, transact_items)",
    "moto.dynamodb.models:get_filter_expression",
    "moto.dynamodb.exceptions:TransactionCanceledException",
    reimplements=True,
)
def cheap_transactions(patches: Patches) -> None:
    """moto deep-copies every table a transaction touches, and keeps the copies. Conditions are
    checked first and only the touched items backed up: all items or none, as in moto."""
    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.exceptions import TransactionCanceledException
    from moto.dynamodb.models.table import Table

    backend_class = dynamodb_models.DynamoDBBackend
    original = backend_class.transact_write_items
    skip_table_copies = threading.local()

    def skipped(value: Any) -> bool:
        return isinstance(value, Table) and getattr(skip_table_copies, "on", False)

    patches.replace(dynamodb_models, "copy", _CopyModule(skipped, lambda table: table))

    def transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
        touched: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        errors: list[tuple[Any, Any, Any]] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table = backend.get_table(op["TableName"])
            if op_type == "Put":
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            current = backend.get_item(op["TableName"], key)
            condition = op.get("ConditionExpression")
            if condition is not None and not dynamodb_models.get_filter_expression(
                condition,
                op.get("ExpressionAttributeNames"),
                op.get("ExpressionAttributeValues"),
            ).expr(current):
                # The item as it was, when asked for, as moto's own check reports it.
                wanted = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                item = current.to_json()["Attributes"] if wanted and current else None
                errors.append(("ConditionalCheckFailed", "The conditional request failed", item))
            else:
                errors.append((None, None, None))
            old = copy.deepcopy(current.to_json()["Attributes"]) if current else None
            touched.append((op["TableName"], key, old))
        if any(code is not None for code, _, _ in errors):
            raise TransactionCanceledException(errors)
        skip_table_copies.on = True
        try:
            original(backend, transact_items)
        except Exception:
            for table_name, key, old in reversed(touched):  # undo partial writes
                if old is None:
                    backend.get_table(table_name).delete_item(
                        *_key_values(backend, table_name, key)
                    )
                else:
                    backend.get_table(table_name).put_item(old)
            raise
        finally:
            skip_table_copies.on = False

    patches.replace(backend_class, "transact_write_items", transact_write_items)


def _key_values(backend: Any, table_name: str, key: dict[str, Any]) -> tuple[Any, Any]:
    """A key as the (hash, range) DynamoType pair moto's Table.delete_item takes."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    table = backend.get_table(table_name)
    hash_value = DynamoType(key[table.hash_key_attr])
    range_value = (
        DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
    )
    return hash_value, range_value


@patch(
    "moto.dynamodb.models.table:Table.query(self, hash_key, range_comparison, range_objs, "
    "limit, exclusive_start_key, scan_index_forward, projection_expressions, index_name, "
    "consistent_read, filter_expression, hash_key_conditions, range_key_conditions, "
    "filter_kwargs)",
    "moto.dynamodb.models.table:Table.all_items(self)",
    "moto.dynamodb.models.table:Table.put_item(self, item_attrs, expected, "
    "condition_expression, expression_attribute_names, expression_attribute_values, overwrite, "
    "return_values_on_condition_check_failure)",
    "moto.dynamodb.models.table:Table.delete_item(self, hash_key, range_key)",
    "moto.dynamodb.models:DynamoDBBackend.update_item(self, table_name, key, update_expression, "
    "expression_attribute_names, expression_attribute_values, attribute_updates, expected, "
    "condition_expression, return_values_on_condition_check_failure)",
    reimplements=True,
)
def indexed_queries(patches: Patches) -> None:
    """moto answers a Query by sorting the whole table (and an index query by testing every item).
    The query gets only the items its hash key names, from the partition or from a map of the
    index kept on every write; moto still sorts, pages, filters and projects them."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.models.table import Table

    original_query = Table.query
    original_all_items = Table.all_items
    original_put = Table.put_item
    original_delete = Table.delete_item
    original_update = DynamoDBBackend.update_item
    narrowed = threading.local()  # (table, candidate items) while that table's query runs

    def all_items(table: Any) -> list[Any]:
        only = getattr(narrowed, "value", None)
        if only is not None and only[0] is table:
            return list(only[1])  # moto's query sorts what it keeps itself
        return original_all_items(table)

    def query(
        table: Any,
        hash_key: Any,
        range_comparison: Any,
        range_objs: Any,
        limit: Any,
        exclusive_start_key: Any,
        scan_index_forward: Any,
        projection_expressions: Any,
        index_name: str | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        candidates = _candidates(table, hash_key, index_name, kwargs.get("hash_key_conditions"))
        if candidates is not None and index_name:
            candidates = _after_start(
                table,
                index_name,
                candidates,
                limit,
                exclusive_start_key,
                scan_index_forward,
                (range_comparison, range_objs) if range_comparison else None,
            )
        previous = getattr(narrowed, "value", None)
        if candidates is not None:
            narrowed.value = (table, candidates)
        try:
            return original_query(
                table,
                hash_key,
                range_comparison,
                range_objs,
                limit,
                exclusive_start_key,
                scan_index_forward,
                projection_expressions,
                index_name,
                *args,
                **kwargs,
            )
        finally:
            narrowed.value = previous

    def put_item(table: Any, *args: Any, **kwargs: Any) -> Any:
        item = original_put(table, *args, **kwargs)
        _reindex(table, item.hash_key, item.range_key)
        return item

    def delete_item(table: Any, hash_key: Any, range_key: Any) -> Any:
        item = original_delete(table, hash_key, range_key)
        _reindex(table, hash_key, range_key)
        return item

    def update_item(backend: Any, table_name: str, key: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_update(backend, table_name, key, *args, **kwargs)
        finally:  # moto updates the item in place, also when a later step of it fails
            table = backend.tables.get(table_name)
            if table is not None and isinstance(key, dict) and table.hash_key_attr in key:
                range_attr = table.range_key_attr
                _reindex(
                    table,
                    DynamoType(key[table.hash_key_attr]),
                    DynamoType(key[range_attr]) if range_attr and range_attr in key else None,
                )

    def _candidates(
        table: Any, hash_key: Any, index_name: str | None, conditions: Any
    ) -> list[Any] | None:
        """The items a query's hash key condition can match; None: let moto look at all."""
        if not index_name:
            if hash_key is None:
                return None
            partition = table.items.get(hash_key)
            if partition is None:
                return []
            return list(partition.values()) if table.range_key_attr else [partition]
        indexes = _gsi_maps(table)
        if index_name not in indexes:
            return None  # a local secondary index: same partition as the table's, rare here
        attribute, by_value, _ = indexes[index_name]
        wanted = next((value for name, value in conditions or () if name == attribute), None)
        if wanted is None:
            return None
        found = []
        for hash_value, range_value in by_value.get(wanted, ()):
            item = table.get_item(hash_value, range_value)
            if isinstance(item, Item):
                found.append(item)
        return found

    patches.replace(Table, "all_items", all_items)
    patches.replace(Table, "query", query)
    patches.replace(Table, "put_item", put_item)
    patches.replace(Table, "delete_item", delete_item)
    patches.replace(DynamoDBBackend, "update_item", update_item)


def _after_start(
    table: Any,
    index_name: str,
    candidates: list[Any],
    limit: int | None,
    start: Mapping[str, Any] | None,
    forward: bool,
    range_condition: tuple[str, list[Any]] | None,
) -> list[Any]:
    """The index partition's items a page can hold, in moto's order (index range key, then the
    table's keys): those after `start` within the range condition, at most `limit` + 1 (the
    extra one tells moto there is a next page). moto still sorts, pages and filters them; a
    range condition not judged here is left to moto."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    in_range = _range_test(range_condition) if range_condition else None
    judged = range_condition is None or in_range is not None
    if start is None and (limit is None or not judged):
        return candidates
    index = table.get_index(index_name)
    ranges = [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
    if len(ranges) != 1 or table.range_key_attr is None:
        return candidates  # moto's other orders (no index range key): leave them to it
    attributes = (ranges[0], table.hash_key_attr, table.range_key_attr)

    keyed = []
    for item in candidates:
        values = [item.attrs.get(a) for a in attributes]
        if any(v is None for v in values):
            continue  # no entry of the index (moto's query skips it too)
        keyed.append((tuple(_plain(v) for v in values), item))
    keyed.sort(key=lambda pair: pair[0], reverse=not forward)
    if start is not None:
        try:
            mark = tuple(_plain(DynamoType(start[a])) for a in attributes)
        except (KeyError, TypeError, ValueError):
            return candidates  # a start key moto will refuse or read its own way
        keyed = [p for p in keyed if (p[0] > mark if forward else p[0] < mark)]
    if in_range is not None:
        # The range is one run of the order (it bounds the index range key, the first sort
        # key): what comes before it is skipped, and the item after it stays, as moto looks
        # one item past a full page to say it has a next (LastEvaluatedKey).
        first = next(
            (i for i, (_, item) in enumerate(keyed) if in_range(item.attrs[attributes[0]])),
            len(keyed),
        )
        keyed = keyed[first:]
    if limit is not None and judged:
        keyed = keyed[: limit + 1]
    return [item for _, item in keyed]


def _plain(value: Any) -> Any:
    """A moto DynamoType's value to compare in Python: numbers as floats, strings as they are."""
    return float(value.value) if value.type == "N" else value.value


_KEY_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _range_test(condition: tuple[str, list[Any]]) -> Callable[[Any], bool] | None:
    """A key condition on a range key as a test of one item's value (a moto DynamoType), for
    strings (code point order is UTF-8 byte order, DynamoDB's) and numbers; None for what it
    cannot judge (binary values, an operator it does not know)."""
    name, operands = condition[0].upper(), condition[1]
    kinds = {o.type for o in operands}
    if len(kinds) != 1 or not kinds <= {"S", "N"}:
        return None
    kind = kinds.pop()

    bounds = [_plain(o) for o in operands]

    def on_plain(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
        return lambda value: value.type == kind and test(_plain(value))

    if name == "BETWEEN" and len(bounds) == 2:
        return on_plain(lambda v: bounds[0] <= v <= bounds[1])
    if name == "BEGINS_WITH" and kind == "S":
        return on_plain(lambda v: v.startswith(bounds[0]))
    compare = _KEY_COMPARISONS.get(name)
    if compare is not None and len(bounds) == 1:
        return on_plain(lambda v: compare(v, bounds[0]))
    return None


# Per table: index name -> (its first hash key attribute, value -> item keys, item key -> value).
_GsiMaps = dict[str, tuple[str, dict[Any, set[tuple[Any, Any]]], dict[tuple[Any, Any], Any]]]

_GSI_ATTRIBUTE = "_a2a_local_gsi_maps"


def _gsi_maps(table: Any) -> _GsiMaps:
    """The table's index maps, built from its items on first use (later kept by _reindex)."""
    maps: _GsiMaps | None = table.__dict__.get(_GSI_ATTRIBUTE)
    schema = [
        (index.name, next(k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"))
        for index in table.global_indexes
    ]
    if maps is not None and [(n, a) for n, (a, _, _) in maps.items()] == schema:
        return maps
    maps = {name: (attribute, {}, {}) for name, attribute in schema}
    table.__dict__[_GSI_ATTRIBUTE] = maps
    for item in _every_item(table):
        _index_item(maps, (item.hash_key, item.range_key), item)
    return maps


def _every_item(table: Any) -> list[Any]:
    items: list[Any] = []
    for partition in table.items.values():
        items.extend(partition.values() if table.range_key_attr else [partition])
    return items


def _index_item(maps: _GsiMaps, key: tuple[Any, Any], item: Any) -> None:
    for attribute, by_value, where in maps.values():
        old = where.pop(key, None)
        if old is not None:
            keys = by_value.get(old)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del by_value[old]
        value = item.attrs.get(attribute) if item is not None else None
        if value is not None and value.type in ("S", "N", "B"):  # key types; a copy, as
            value = type(value)({value.type: value.value})  # moto may update attrs in place
            where[key] = value
            by_value.setdefault(value, set()).add(key)


def _reindex(table: Any, hash_value: Any, range_value: Any) -> None:
    """After a write to one key: move the key to the index entries of what is stored now."""
    maps: _GsiMaps | None = table.__dict__.get(_GSI_ATTRIBUTE)
    if maps is None:
        return  # not built yet: built from the items on the first index query
    try:
        item = table.get_item(hash_value, range_value)
    except Exception:  # moto's validation of an odd key: nothing stored under it
        item = None
    _index_item(maps, (hash_value, range_value), item)


@patch(
    "moto.dynamodb.models.table:SecondaryIndex.project(self, item)",
    reimplements=True,
)
def index_projections_direct(patches: Patches) -> None:
    """moto projects an index entry by turning the whole item into JSON and back per attribute.
    KEYS_ONLY and INCLUDE projections take the named top-level attributes as stored."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import SecondaryIndex

    original = SecondaryIndex.project

    def project(index: Any, item: Any) -> Any:
        projection = index.projection or {}
        kind = projection.get("ProjectionType")
        if kind not in ("KEYS_ONLY", "INCLUDE"):
            return original(index, item)
        allowed = [*index.table_key_attrs, *index.schema_key_attrs]
        if kind == "INCLUDE":
            allowed += projection.get("NonKeyAttributes", [])
        projected = Item(item.hash_key, item.range_key, {})
        # dict.update: no per-attribute size check (a projection only takes attributes away).
        dict.update(projected.attrs, {a: item.attrs[a] for a in allowed if a in item.attrs})
        return projected

    patches.replace(SecondaryIndex, "project", project)


@patch(
    "moto.dynamodb.models.table:copy",
    "moto.dynamodb.models.table:Table.query(self, hash_key, range_comparison, range_objs, "
    "limit, exclusive_start_key, scan_index_forward, projection_expressions, index_name, "
    "consistent_read, filter_expression, hash_key_conditions, range_key_conditions, "
    "filter_kwargs)",
    reimplements=True,
)
def query_results_read_in_place(patches: Patches) -> None:
    """moto deep-copies every item a Query returns. The results are passed on as stored: what
    follows only reads them, under the DynamoDB lock."""
    import moto.dynamodb.models.table as table_module

    original = table_module.Table.query
    querying = threading.local()

    def results(value: Any) -> bool:  # the only list a query copies
        return type(value) is list and getattr(querying, "on", False)

    def query(table: Any, *args: Any, **kwargs: Any) -> Any:
        querying.on = True
        try:
            return original(table, *args, **kwargs)
        finally:
            querying.on = False

    patches.replace(table_module, "copy", _CopyModule(results, list))
    patches.replace(table_module.Table, "query", query)


@patch(
    "moto.core.serialize:BaseJSONSerializer._serialize_type_structure(self, serialized, value, "
    "shape, key)",
    reimplements=True,
)
def attribute_values_written_directly(patches: Patches) -> None:
    """moto writes a DynamoDB attribute value by asking its shape's ten members in turn. A plain
    attribute value is written as the one-key dict it is, blobs in base64."""
    from moto.core import serialize

    base = serialize.BaseJSONSerializer
    original = base._serialize_type_structure

    def structure(serializer: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if (
            key
            and type(value) is dict
            and shape.name == "AttributeValue"
            and serializer.service_model.service_name in ("dynamodb", "dynamodbstreams")
            and not getattr(serializer._value_picker, "response_transformers", None)
        ):
            written = _attribute_value(serializer, value)
            if written is not None:
                serialized[serializer.get_serialized_name(shape, key)] = written
                return
        original(serializer, serialized, value, shape, key)

    patches.replace(base, "_serialize_type_structure", structure)


_AV_SCALARS: dict[str, type] = {"S": str, "N": str, "BOOL": bool, "NULL": bool}

_AV_STRING_LISTS = ("SS", "NS")


def _attribute_value(serializer: Any, value: dict[str, Any]) -> dict[str, Any] | None:
    """A DynamoDB attribute value (a plain dict, as moto's results hold them) as moto's JSON
    serializer writes it, or None where the value holds anything else (moto's then)."""
    out: dict[str, Any] = {}
    for kind, member in value.items():
        if member is None:
            continue  # moto's walk skips absent members
        if type(member) is _AV_SCALARS.get(kind):
            out[kind] = member
        elif kind == "B" and isinstance(member, bytes | str):
            out[kind] = serializer._base64(member)
        elif kind in _AV_STRING_LISTS and type(member) is list:
            if not all(type(e) is str for e in member):
                return None
            out[kind] = list(member)
        elif kind == "BS" and type(member) is list:
            if not all(isinstance(e, bytes | str) for e in member):
                return None
            out[kind] = [serializer._base64(e) for e in member]
        elif kind == "M" and type(member) is dict:
            entries = _attribute_values(serializer, member.values())
            if entries is None:
                return None
            out[kind] = dict(zip(member, entries, strict=True))
        elif kind == "L" and type(member) is list:
            elements = _attribute_values(serializer, member)
            if elements is None:
                return None
            out[kind] = elements
        else:
            return None  # not a member moto's shape has, or a type moto would convert
    return out


def _attribute_values(serializer: Any, values: Iterable[Any]) -> list[dict[str, Any]] | None:
    written = []
    for value in values:
        one = _attribute_value(serializer, value) if type(value) is dict else None
        if one is None:
            return None
        written.append(one)
    return written


@patch(
    "moto.stepfunctions.parser.asl.parse.asl_parser:AmazonStateLanguageParser.parse(definition)",
    "moto.stepfunctions.parser.asl.parse.preprocessor:Preprocessor",
)
def parsed_definitions_kept(patches: Patches) -> None:
    """moto parses a state machine's definition with ANTLR for every execution. Each definition's
    parse tree is kept; the components are built from it afresh, as moto does."""
    from moto.stepfunctions.parser.asl.parse import asl_parser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    parser_class = asl_parser.AmazonStateLanguageParser
    original = parser_class.parse
    trees: dict[str, Any] = {}
    kept = 64  # definitions: a stack has a handful; tests make more, each a new stack

    def parse(definition: str) -> tuple[Any, Any]:
        tree = trees.get(definition)
        if tree is None:
            program, tree = original(definition)  # raises on syntax errors, as moto does
            if len(trees) >= kept:
                trees.pop(next(iter(trees)))
            trees[definition] = tree
            return program, tree
        return Preprocessor().visit(tree), tree

    patches.replace(parser_class, "parse", staticmethod(parse))


@patch(*patching.STATE_MACHINE_CLIENTS)
def shared_state_machine_clients(patches: Patches) -> None:
    """moto's Step Functions interpreter builds a boto3 client for every Lambda call. One client per
    region, service and role is kept (boto3 clients are thread-safe)."""
    clients: dict[tuple[str, str, str], Any] = {}

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
            key = (region, service, str(getattr(state_credentials, "role_arn", None)))
            client = clients.get(key)
            if client is None:
                client = original(
                    region=region, service=service, state_credentials=state_credentials
                )
                clients[key] = client
            return client

        return boto_client_for

    patching.wrap_state_machine_clients(patches, wrap)


@patch(
    "moto.sqs.models:Queue.approximate_number_of_messages",
    "moto.sqs.models:Queue.approximate_number_of_messages_not_visible",
    "moto.sqs.models:Queue.approximate_number_of_messages_delayed",
    "moto.sqs.models:SQSBackend.send_message(self, queue_name, message_body, "
    "message_attributes, delay_seconds, deduplication_id, group_id, system_attributes, "
    "validate_group_id)",
    "moto.sqs.models:SQSBackend.send_message_batch(self, queue_name, entries)",
    reimplements=True,
)
def cheap_queue_sends(patches: Patches) -> None:
    """moto counts every message of a queue, six times per message sent, to learn whether it
    deduplicates by content. While a send runs, those counts (which it never reads) are 0."""
    from moto.sqs.models import Queue, SQSBackend

    for name in (
        "approximate_number_of_messages",
        "approximate_number_of_messages_not_visible",
        "approximate_number_of_messages_delayed",
    ):
        counted = getattr(Queue, name)

        def count(queue: Any, counted: Any = counted) -> int:
            return 0 if getattr(_SENDING, "active", False) else int(counted.fget(queue))

        patches.replace(Queue, name, property(count))

    for name in ("send_message", "send_message_batch"):
        send = getattr(SQSBackend, name)

        def sending(backend: Any, *args: Any, send: Any = send, **kwargs: Any) -> Any:
            outer = getattr(_SENDING, "active", False)
            _SENDING.active = True
            try:
                return send(backend, *args, **kwargs)
            finally:
                _SENDING.active = outer

        patches.replace(SQSBackend, name, sending)


_SENDING = threading.local()


@patch(
    "moto.sqs.models:SQSBackend.is_message_valid_based_on_retention_period(self, queue_name, "
    "message)",
    reimplements=True,
)
def retention_read_directly(patches: Patches) -> None:
    """For each message it receives, moto reads the queue's retention period from all its
    attributes, built three times, each counting every message. It is read off the queue."""
    from moto.sqs import models

    def retained(backend: Any, queue_name: str, message: Any) -> bool:
        retention = backend.get_queue(queue_name).message_retention_period
        return bool(retention + message.sent_timestamp / 1000 > models.unix_time())

    patches.replace(models.SQSBackend, "is_message_valid_based_on_retention_period", retained)


SPEEDUPS: tuple[Patch, ...] = (
    direct_dynamodb_calls,
    dynamodb_bodies_read_once,
    parsed_conditions_kept,
    parsed_update_expressions_kept,
    processing_maps_kept,
    planned_updates,
    handler_methods_kept,
    cheap_transactions,
    indexed_queries,
    index_projections_direct,
    query_results_read_in_place,
    attribute_values_written_directly,
    parsed_definitions_kept,
    shared_state_machine_clients,
    cheap_queue_sends,
    retention_read_directly,
)


def chosen(value: str | None) -> list[Patch]:
    """The speed-ups `value` (A2A_LOCAL_SPEEDUPS) asks for: unset, empty, `1` or `all`: every
    one; `0` or `none`: none; else a comma list of names, `all`, and `-name` for all but that
    one (`all,-planned_updates`). An unknown name raises ValueError."""
    words = [w.strip() for w in (value or "all").split(",") if w.strip()] or ["all"]
    by_name = {s.name: s for s in SPEEDUPS}
    unknown = [w for w in words if w.lstrip("-") not in {*by_name, "all", "none", "0", "1"}]
    if unknown:
        raise ValueError(f"{ENV}: unknown speed-ups {unknown}; known: {sorted(by_name)}")
    wanted = {s.name for s in SPEEDUPS} if {"all", "1"} & set(words) else set()
    wanted |= {w for w in words if w in by_name}
    wanted -= {w[1:] for w in words if w.startswith("-")}
    return [s for s in SPEEDUPS if s.name in wanted]


def apply(patches: Patches, speedups: Iterable[Patch]) -> list[str]:
    """Apply the `speedups` (see `chosen`) that fit the moto installed; log one warning for each
    that does not, naming what changed. Returns the names applied."""
    applied = []
    for speedup in speedups:
        found = problem(speedup)
        if found is not None:
            logger.warning("local stack: speed-up %s skipped: %s", speedup.name, found)
            continue
        speedup(patches)
        applied.append(speedup.name)
    return applied
