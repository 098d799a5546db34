"""The content bucket's S3 calls as IAM authorizes them (local/calls.py): a multipart upload's
steps are s3:PutObject, aborting one s3:AbortMultipartUpload, on the object's ARN."""

from __future__ import annotations

import pytest

from a2a_serverless.local.calls import authorizations

OBJECT = {"Bucket": "content", "Key": "tasks/t-1/raw.abc"}
ARN = "arn:aws:s3:::content/tasks/t-1/raw.abc"


@pytest.mark.parametrize(
    ("operation", "action"),
    [
        ("PutObject", "s3:PutObject"),
        ("GetObject", "s3:GetObject"),
        ("HeadObject", "s3:GetObject"),
        ("CreateMultipartUpload", "s3:PutObject"),
        ("UploadPart", "s3:PutObject"),
        ("CompleteMultipartUpload", "s3:PutObject"),
        ("AbortMultipartUpload", "s3:AbortMultipartUpload"),
        ("ListParts", "s3:ListMultipartUploadParts"),
    ],
)
def test_object_operations(operation: str, action: str) -> None:
    params = {**OBJECT, "UploadId": "u", "PartNumber": 1}
    assert authorizations("s3", operation, params, region="us-east-1", account="123456789012") == [
        (action, ARN)
    ]
