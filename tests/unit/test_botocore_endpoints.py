"""botocore's endpoints.json cut to the functions' services (botocore_endpoints.py): the same
endpoints, signing and URLs as the whole file for those services in every partition and
region, read only when cut from the botocore that runs, and written by the layer build's step
(`python -m a2a_serverless.botocore_endpoints SITE_DIR`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore
import botocore.session
import pytest
from botocore.regions import EndpointResolver

from a2a_serverless import botocore_endpoints, wiring
from a2a_serverless.botocore_endpoints import SERVICES, cut, main, use_cut_endpoints, write_cut

BOTOCORE = Path(botocore.__file__).parent
FULL = json.loads((BOTOCORE / "data" / "endpoints.json").read_text())


@pytest.fixture
def cut_file(tmp_path: Path) -> Path:
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
CALLS = {
    "dynamodb": ("get_item", {"TableName": "t", "Key": {"pk": {"S": "x"}}}),
    "stepfunctions": ("describe_execution", {"executionArn": "arn:aws:states:::execution:m:e"}),
    "sqs": ("get_queue_url", {"QueueName": "q"}),
    "kms": ("get_public_key", {"KeyId": "alias/k"}),
}


class _Sent(Exception):
    """Raised by the send hook: the request went no further than being signed."""


def _sent(session: Any, service: str, region: str) -> tuple[str, str]:
    """The URL and the credential scope of one call, signed and never sent."""
    seen: list[tuple[str, str]] = []

    def capture(request: Any, **_: Any) -> None:
        authorization = request.headers["Authorization"].decode()
        scope = authorization.split("Credential=")[1].split(",")[0].split("/", 2)[2]
        seen.append((request.url, scope))
        raise _Sent

    client = session.create_client(
        service, region_name=region, aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="s"
    )
    client.meta.events.register("before-send", capture)
    operation, params = CALLS[service]
    with pytest.raises(_Sent):
        getattr(client, operation)(**params)
    return seen[0]


def test_the_functions_clients_send_to_the_same_urls_with_the_same_signing(
    cut_file: Path,
) -> None:
    whole = botocore.session.get_session()
    ours = botocore.session.get_session()
    assert use_cut_endpoints(ours.get_component("data_loader"), botocore.__version__, cut_file)
    for region in REGIONS:
        for service in CALLS:
            assert _sent(ours, service, region) == _sent(whole, service, region), (service, region)


def test_a_client_made_from_the_cut_never_reads_endpoints_json(cut_file: Path) -> None:
    session = botocore.session.get_session()
    loader = session.get_component("data_loader")
    read: list[str] = []
    load_file = loader.file_loader.load_file

    def spy(path: str) -> Any:
        read.append(path)
        return load_file(path)

    loader.file_loader.load_file = spy
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


def test_wiring_s_own_session_reads_the_cut(
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


def test_the_build_step_cuts_the_layer_s_botocore(tmp_path: Path, capsys: Any) -> None:
    site = tmp_path / "python"
    (site / "botocore" / "data").mkdir(parents=True)
    (site / "a2a_serverless").mkdir()
    (site / "botocore" / "__init__.py").write_text("import os\n\n__version__ = '1.2.3'\n")
    (site / "botocore" / "data" / "endpoints.json").write_text(json.dumps(FULL))
    assert main([str(site)]) == 0
    document = json.loads((site / "a2a_serverless" / "_endpoints.json").read_text())
    assert document == {"botocore": "1.2.3", "endpoints": cut(FULL)}
    assert "endpoints cut to dynamodb, kms, sqs, states" in capsys.readouterr().out


def test_the_build_step_without_botocore_cuts_nothing_and_says_so(
    tmp_path: Path, capsys: Any
) -> None:
    assert main([str(tmp_path)]) == 0
    assert "endpoints not cut" in capsys.readouterr().out
    assert not list(tmp_path.rglob("_endpoints.json"))
    assert main([]) == 2
