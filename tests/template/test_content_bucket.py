"""The content bucket (large part content and flow states): private, encrypted, TLS only,
emptied by its lifecycle as tasks expire, deleted with the stack; the functions that store or
hand out content get exactly that on its `tasks/` objects, and the IAM check of observed calls
catches an S3 call a role does not allow."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.iam_check import Call, CallLog, evaluate
from tests.template.sam import FUNCTIONS, grants, resource_key, role_of, translate
from tests.template.test_iam_observed import RESOURCES

CONTENT = resource_key({"Fn::Sub": "${ContentBucket.Arn}/tasks/*"})
# The S3 actions of each function on the bucket's task objects; no other function has any.
S3_GRANTS = {
    "SendMessageFunction": {"s3:PutObject", "s3:GetObject"},
    "StreamFunction": {"s3:PutObject", "s3:GetObject"},
    "FlowWorkerFunction": {"s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"},
    "GetTaskFunction": {"s3:GetObject"},
    "ListTasksFunction": {"s3:GetObject"},
    "WebhookSenderFunction": {"s3:GetObject"},
    "DelegationReceiverFunction": {"s3:PutObject"},  # forwarded remote artifacts
}
BUCKET = "a2a-local-contentbucket"  # RESOURCES' ContentBucket.Arn
OBJECT = f"arn:aws:s3:::{BUCKET}/tasks/t-1/raw.abc"


def _bucket(cfn: dict[str, Any]) -> dict[str, Any]:
    bucket = cfn["Resources"]["ContentBucket"]
    assert bucket["Type"] == "AWS::S3::Bucket"
    return bucket


def test_the_bucket_is_private_encrypted_and_owned_by_the_account(cfn: dict[str, Any]) -> None:
    props = _bucket(cfn)["Properties"]
    assert "BucketName" not in props  # a new stack never meets an existing bucket's name
    assert props["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
    }
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}


def test_the_bucket_goes_with_the_stack(cfn: dict[str, Any]) -> None:
    """Delete (the default): a failed first create leaves nothing; deleting the stack fails
    while objects remain (docs/deploy.md says how to empty it)."""
    bucket = _bucket(cfn)
    assert bucket.get("DeletionPolicy", "Delete") == "Delete"
    assert bucket.get("UpdateReplacePolicy", "Delete") == "Delete"
    assert "DependsOn" not in bucket and "Condition" not in bucket
    assert cfn["Outputs"]["ContentBucketName"]["Value"] == {"Ref": "ContentBucket"}


def test_objects_expire_with_the_tasks_and_stale_uploads_are_aborted(cfn: dict[str, Any]) -> None:
    lifecycle = _bucket(cfn)["Properties"]["LifecycleConfiguration"]
    rules = {rule["Id"]: rule for rule in lifecycle["Rules"]}
    assert rules == {
        "ExpireWithTheTasks": {
            "Id": "ExpireWithTheTasks",
            "Status": "Enabled",
            "ExpirationInDays": {"Ref": "RetentionDays"},
        },
        "AbortIncompleteUploads": {
            "Id": "AbortIncompleteUploads",
            "Status": "Enabled",
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
    }


def test_the_bucket_policy_denies_everything_without_tls(cfn: dict[str, Any]) -> None:
    policy = cfn["Resources"]["ContentBucketPolicy"]
    assert policy["Type"] == "AWS::S3::BucketPolicy"
    assert policy["Properties"]["Bucket"] == {"Ref": "ContentBucket"}
    document = policy["Properties"]["PolicyDocument"]
    assert document["Statement"] == [
        {
            "Sid": "TlsOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [
                {"Fn::GetAtt": ["ContentBucket", "Arn"]},
                {"Fn::Sub": "${ContentBucket.Arn}/*"},
            ],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ]


def test_every_function_knows_the_bucket_and_the_url_lifetime(cfn: dict[str, Any]) -> None:
    for name in FUNCTIONS:
        env = cfn["Resources"][name]["Properties"]["Environment"]["Variables"]
        assert env["CONTENT_BUCKET"] == {"Ref": "ContentBucket"}, name
        assert env["CONTENT_URL_SECONDS"] == {"Ref": "ContentUrlSeconds"}, name
    parameter = cfn["Parameters"]["ContentUrlSeconds"]
    assert (parameter["Default"], parameter["MinValue"], parameter["MaxValue"]) == (900, 1, 604800)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_s3_grants_are_exactly_each_function_s_use(cfn: dict[str, Any], name: str) -> None:
    s3 = {
        action: resources
        for action, resources in grants(role_of(cfn, name)[1]).items()
        if action.startswith("s3:")
    }
    assert s3 == {action: {CONTENT} for action in S3_GRANTS.get(name, set())}


def _log(*calls: Call) -> CallLog:
    log = CallLog(stacks={"s1": RESOURCES})
    for call in calls:
        log.calls[("s1", call)] = None
    return log


def test_the_iam_check_allows_the_content_calls(cfn: dict[str, Any]) -> None:
    calls = [
        Call(name, action, OBJECT) for name, actions in S3_GRANTS.items() for action in actions
    ]
    report = evaluate(_log(*calls), cfn)
    assert not report.failed, report.denied


@pytest.mark.parametrize(
    "call",
    [
        Call("AgentCardFunction", "s3:GetObject", OBJECT),
        Call("PushConfigFunction", "s3:GetObject", OBJECT),
        Call("AuthorizerFunction", "s3:GetObject", OBJECT),
        Call("GetTaskFunction", "s3:PutObject", OBJECT),  # a reader writing
        Call("SendMessageFunction", "s3:AbortMultipartUpload", OBJECT),
        Call("FlowWorkerFunction", "s3:DeleteObject", OBJECT),
        Call("FlowWorkerFunction", "s3:GetObject", f"arn:aws:s3:::{BUCKET}/other/x"),
        Call("FlowWorkerFunction", "s3:GetObject", "arn:aws:s3:::another-bucket/tasks/x"),
    ],
)
def test_the_iam_check_denies_other_s3_calls(cfn: dict[str, Any], call: Call) -> None:
    report = evaluate(_log(call), cfn)
    assert report.failed and report.denied == [call]


def test_a_missing_s3_permission_is_caught(sam: dict[str, Any]) -> None:
    """GetTask signing a URL (recorded as its s3:GetObject) with a role that lost it."""
    without = copy.deepcopy(sam)
    statements = without["Resources"]["GetTaskFunction"]["Properties"]["Policies"][0]["Statement"]
    statements[:] = [s for s in statements if "s3:GetObject" not in s["Action"]]
    presign = Call("GetTaskFunction", "s3:GetObject", OBJECT, "s3:GetObject (presigned)")
    assert not evaluate(_log(presign), translate(sam)).failed
    report = evaluate(_log(presign), translate(without))
    assert report.failed and report.denied == [presign]
