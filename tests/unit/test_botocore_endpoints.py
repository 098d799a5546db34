"""botocore's endpoints.json cut to the functions' services (botocore_endpoints.py): the same
endpoints, signing and URLs as the whole file for those services in every partition and
region, read only when cut from the botocore that runs, and written by the layer build's step
(`python -m a2a_serverless.botocore_endpoints SITE_DIR`)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore
import botocore.session
import pytest
from botocore.model import ServiceModel
from botocore.regions import EndpointResolver

from a2a_serverless import botocore_endpoints, wiring
from a2a_serverless.botocore_endpoints import (
    MODEL_SERVICES,
    SERVICES,
    cut,
    main,
    model_file,
    undocumented,
    use_cut_endpoints,
    use_cut_models,
    write_cut,
    write_model_cuts,
)

BOTOCORE = Path(botocore.__file__).parent
FULL = json.loads((BOTOCORE / "data" / "endpoints.json").read_text())


@pytest.fixture
def cut_file(tmp_path: Path) -> Path:
    """The endpoints cut, and the service models' cuts beside it."""
    write_model_cuts(BOTOCORE, tmp_path)
    return write_cut(BOTOCORE, tmp_path / "_endpoints.json")


def test_the_cut_keeps_every_partition_and_only_the_functions_services() -> None:
    data = cut(FULL)
    assert [p["partition"] for p in data["partitions"]] == [
        p["partition"] for p in FULL["partitions"]
    ]
    for ours, theirs in zip(data["partitions"], FULL["partitions"], strict=True):
        assert {k: v for k, v in ours.items() if k != "services"} == {
            k: v for k, v in theirs.items() if k != "services"
        }
        assert set(ours["services"]) == set(SERVICES) & set(theirs["services"])
        for name, service in ours["services"].items():
            assert service == theirs["services"][name]
    assert {"dynamodb", "states", "sqs", "kms"} <= set(FULL["partitions"][0]["services"])
    assert len(json.dumps(data)) < len(json.dumps(FULL)) / 20


@pytest.mark.parametrize(
    "variant", [{}, {"use_fips_endpoint": True}, {"use_dualstack_endpoint": True}]
)
def test_each_service_resolves_as_with_the_whole_file_in_every_region(
    variant: dict[str, bool],
) -> None:
    whole, ours = EndpointResolver(FULL, True), EndpointResolver(cut(FULL), True)
    checked = 0
    for partition in FULL["partitions"]:
        for region in [*partition["regions"], "xx-future-1"]:
            for service in SERVICES:
                expected = _resolved(whole, service, region, partition["partition"], variant)
                assert _resolved(ours, service, region, partition["partition"], variant) == (
                    expected
                ), (service, region, variant)
                checked += 1
    assert checked > 100


def _resolved(
    resolver: EndpointResolver, service: str, region: str, partition: str, variant: dict[str, bool]
) -> Any:
    try:
        return resolver.construct_endpoint(service, region, partition_name=partition, **variant)
    except Exception as exc:  # the same refusal either way (e.g. no dual-stack endpoint)
        return type(exc).__name__


# Regions of four partitions: the request URL and the signature's scope come out the same.
REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1", "us-gov-west-1")
# One call per service, and the calls of the functions' hot paths (nested attribute values):
# the same bytes from the cut service models as from botocore's.
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("dynamodb", "get_item", {"TableName": "t", "Key": {"pk": {"S": "x"}}}),
    (
        "dynamodb",
        "transact_write_items",
        {
            "TransactItems": [
                {
                    "Update": {
                        "TableName": "t",
                        "Key": {"pk": {"S": "x"}, "sk": {"S": "y"}},
                        "UpdateExpression": "SET #a = :a ADD n :one",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeNames": {"#a": "a"},
                        "ExpressionAttributeValues": {
                            ":a": {"M": {"l": {"L": [{"B": b"\x00"}, {"NULL": True}]}}},
                            ":one": {"N": "1"},
                        },
                    }
                },
                {"Put": {"TableName": "t", "Item": {"pk": {"S": "z"}, "ss": {"SS": ["a"]}}}},
            ],
            "ClientRequestToken": "token",
        },
    ),
    (
        "stepfunctions",
        "start_execution",
        {
            "stateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:m",
            "name": "n",
            "input": "{}",
        },
    ),
    (
        "sqs",
        "send_message_batch",
        {
            "QueueUrl": "https://sqs.us-east-1.amazonaws.com/1/q.fifo",
            "Entries": [{"Id": "0", "MessageBody": "b", "MessageGroupId": "g"}],
        },
    ),
    ("stepfunctions", "describe_execution", {"executionArn": "arn:aws:states:::execution:m:e"}),
    ("sqs", "get_queue_url", {"QueueName": "q"}),
    ("kms", "get_public_key", {"KeyId": "alias/k"}),
]


class _Sent(Exception):
    """Raised by the send hook: the request went no further than being signed."""


def _sent(
    session: Any, service: str, operation: str, params: dict[str, Any], region: str
) -> tuple[str, str, bytes, str]:
    """The URL, the credential scope, the body and the target header of one call, signed and
    never sent."""
    seen: list[tuple[str, str, bytes, str]] = []

    def capture(request: Any, **_: Any) -> None:
        authorization = request.headers["Authorization"].decode()
        scope = authorization.split("Credential=")[1].split(",")[0].split("/", 2)[2]
        target = request.headers.get("X-Amz-Target", b"").decode()
        seen.append((request.url, scope, request.body or b"", target))
        raise _Sent

    client = session.create_client(
        service,
        region_name=region,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="s",
    )
    client.meta.events.register("before-send", capture)
    with pytest.raises(_Sent):
        getattr(client, operation)(**params)
    return seen[0]


def test_the_functions_clients_send_to_the_same_urls_with_the_same_signing(
    cut_file: Path,
) -> None:
    whole = botocore.session.get_session()
    ours = botocore.session.get_session()
    assert use_cut_endpoints(ours.get_component("data_loader"), botocore.__version__, cut_file)
    use_cut_models(ours.get_component("data_loader"), botocore.__version__, cut_file.parent)
    for region in REGIONS:
        for service, operation, params in CALLS:
            assert _sent(ours, service, operation, params, region) == _sent(
                whole, service, operation, params, region
            ), (operation, region)


def _files_read(loader: Any) -> list[str]:
    """The paths `loader` reads data files from, from now on (appended as it reads)."""
    read: list[str] = []
    load_file = loader.file_loader.load_file

    def spy(path: str) -> Any:
        read.append(path)
        return load_file(path)

    loader.file_loader.load_file = spy
    return read


def test_a_client_made_from_the_cut_never_reads_endpoints_json(cut_file: Path) -> None:
    session = botocore.session.get_session()
    loader = session.get_component("data_loader")
    read = _files_read(loader)
    assert use_cut_endpoints(loader, botocore.__version__, cut_file)
    session.create_client("dynamodb", region_name="eu-west-1")
    assert not [p for p in read if p.endswith("endpoints")]
    assert any(p.endswith("service-2") for p in read)  # the spy sees the other files


@pytest.mark.parametrize(
    "content",
    [
        None,  # no file: the dev tree, tests
        '{"botocore": "0.0.0", "endpoints": {"partitions": []}}',  # cut from another botocore
        "not json",
        '["a list"]',
    ],
)
def test_without_a_cut_of_this_botocore_the_loader_reads_botocore_s_own(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "_endpoints.json"
    if content is not None:
        path.write_text(content)
    loader = botocore.session.get_session().get_component("data_loader")
    assert not use_cut_endpoints(loader, botocore.__version__, path)
    data, where = loader.load_data_with_path("endpoints")
    assert len(data["partitions"][0]["services"]) > len(SERVICES)
    assert loader.is_builtin_path(where)


def test_wiring_s_own_session_reads_the_cuts(
    cut_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(botocore_endpoints, "CUT_FILE", cut_file)
    session = botocore.session.get_session()
    wiring._lighter_loader(session)
    data, where = session.get_component("data_loader").load_data_with_path("endpoints")
    assert set(data["partitions"][0]["services"]) == set(SERVICES)
    assert session.get_component("data_loader").is_builtin_path(where)
    client = session.create_client("dynamodb", region_name="us-east-1")
    assert client.meta.endpoint_url == "https://dynamodb.us-east-1.amazonaws.com"
    assert "documentation" not in client.meta.service_model._service_description


def test_the_build_step_cuts_the_layer_s_botocore(tmp_path: Path, capsys: Any) -> None:
    site = tmp_path / "python"
    (site / "botocore" / "data").mkdir(parents=True)
    (site / "a2a_serverless").mkdir()
    (site / "botocore" / "__init__.py").write_text("import os\n\n__version__ = '1.2.3'\n")
    (site / "botocore" / "data" / "endpoints.json").write_text(json.dumps(FULL))
    sqs = BOTOCORE / "data" / "sqs"
    (latest,) = [p.name for p in sqs.iterdir() if p.is_dir()]
    for version, model in ((latest, "service-2.json.gz"), ("2000-01-01", "service-2.json")):
        (site / "botocore" / "data" / "sqs" / version).mkdir(parents=True)
        source = sqs / latest / "service-2.json.gz"
        copied = (
            source.read_bytes() if model.endswith(".gz") else gzip.decompress(source.read_bytes())
        )
        (site / "botocore" / "data" / "sqs" / version / model).write_bytes(copied)
    assert main([str(site)]) == 0
    document = json.loads((site / "a2a_serverless" / "_endpoints.json").read_text())
    assert document == {"botocore": "1.2.3", "endpoints": cut(FULL)}
    out = capsys.readouterr().out
    assert "endpoints cut to dynamodb, kms, sqs, states" in out
    assert "service models without documentation: _service-2.sqs.json" in out
    written = {p.name for p in (site / "a2a_serverless").iterdir()}
    assert written == {"_endpoints.json", "_service-2.sqs.json"}
    models = json.loads((site / "a2a_serverless" / "_service-2.sqs.json").read_text())
    assert models == {
        "botocore": "1.2.3",
        "apiVersion": latest,
        "model": undocumented(json.loads(gzip.decompress(source.read_bytes()))),
    }


def test_the_build_step_without_botocore_cuts_nothing_and_says_so(
    tmp_path: Path, capsys: Any
) -> None:
    assert main([str(tmp_path)]) == 0
    assert "endpoints not cut" in capsys.readouterr().out
    assert not list(tmp_path.rglob("_endpoints.json"))
    assert main([]) == 2


def _botocore_model(service: str) -> dict[str, Any]:
    loader = botocore.session.get_session().get_component("data_loader")
    model: dict[str, Any] = loader.load_service_model(service, "service-2")
    return model


def _described(shape: Any, seen: set[str]) -> Any:
    """What botocore makes of a shape, but its documentation (recursive shapes once)."""
    if shape is None:
        return None
    if shape.name in seen:
        return shape.name
    seen = seen | {shape.name}
    members = getattr(shape, "members", None)
    return (
        shape.name,
        shape.type_name,
        shape.serialization,
        {k: v for k, v in shape.metadata.items() if k != "documentation"},
        {name: _described(member, seen) for name, member in (members or {}).items()},
        getattr(shape, "required_members", None),
        _described(getattr(shape, "member", None), seen),
        _described(getattr(shape, "key", None), seen),
        _described(getattr(shape, "value", None), seen),
    )


@pytest.mark.parametrize("service", MODEL_SERVICES)
def test_the_cut_models_describe_the_same_api_without_its_documentation(service: str) -> None:
    full = _botocore_model(service)
    ours = undocumented(full)
    assert "documentation" not in json.dumps(ours).replace('"documentation":{', "")
    assert len(json.dumps(ours)) < len(json.dumps(full)) / 2
    whole, cut_model = ServiceModel(full, service), ServiceModel(ours, service)
    assert cut_model.metadata == whole.metadata
    assert cut_model.operation_names == whole.operation_names
    for name in whole.operation_names:
        a, b = whole.operation_model(name), cut_model.operation_model(name)
        assert (b.http, b.endpoint_discovery, b.context_parameters, b.idempotent_members) == (
            a.http,
            a.endpoint_discovery,
            a.context_parameters,
            a.idempotent_members,
        )
        for side in ("input_shape", "output_shape"):
            assert _described(getattr(b, side), set()) == _described(getattr(a, side), set())
        assert [_described(e, set()) for e in b.error_shapes] == [
            _described(e, set()) for e in a.error_shapes
        ]


def test_names_that_read_documentation_are_kept() -> None:
    model = {
        "documentation": "the service",
        "operations": {"documentation": {"documentation": "an operation so named"}},
        "shapes": {
            "S": {
                "type": "structure",
                "members": {"documentation": {"shape": "D", "documentation": "a member"}},
                "documentation": "a shape",
            },
            "D": {"type": "string", "documentation": {"not": "a string: kept"}},
        },
    }
    assert undocumented(model) == {
        "operations": {"documentation": {}},
        "shapes": {
            "S": {"type": "structure", "members": {"documentation": {"shape": "D"}}},
            "D": {"type": "string", "documentation": {"not": "a string: kept"}},
        },
    }


def test_clients_made_from_the_cut_models_never_read_botocore_s(cut_file: Path) -> None:
    session = botocore.session.get_session()
    loader = session.get_component("data_loader")
    read = _files_read(loader)
    use_cut_models(loader, botocore.__version__, cut_file.parent)
    for service in MODEL_SERVICES:
        client = session.create_client(service, region_name="eu-west-1")
        assert not client.meta.service_model.operation_model(
            client.meta.service_model.operation_names[0]
        ).documentation
    assert not [p for p in read if p.endswith("service-2")], read
    assert any(p.endswith("endpoint-rule-set-1") for p in read)  # the spy sees the others


@pytest.mark.parametrize(
    "change",
    [
        "none",  # no file: the dev tree, tests
        "botocore",  # cut from another botocore
        "apiVersion",  # another API version than the one asked
        "broken",
    ],
)
def test_without_a_model_cut_of_this_botocore_the_loader_reads_botocore_s_own(
    tmp_path: Path, change: str
) -> None:
    write_model_cuts(BOTOCORE, tmp_path)
    path = model_file("dynamodb", tmp_path)
    document = json.loads(path.read_text())
    if change == "none":
        path.unlink()
    elif change == "broken":
        path.write_text("not json")
    else:
        document[change] = "0.0.0"
        path.write_text(json.dumps(document))
    loader = botocore.session.get_session().get_component("data_loader")
    use_cut_models(loader, botocore.__version__, tmp_path)
    assert loader.load_service_model("dynamodb", "service-2")["documentation"]
    assert "documentation" not in loader.load_service_model("sqs", "service-2")
