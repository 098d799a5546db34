"""The content store on S3 (template.yaml `ContentBucket`): one object per stored part or flow
state under `tasks/{taskId}/`, expiring with the task (the bucket's lifecycle rule)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import IO, Any

from a2a_serverless.store.content import object_key

# Parts of a multipart upload: S3 takes 5 MiB to 5 GiB each and at most 10,000 of them, so
# 16 MiB parts carry files up to 160 GB; a smaller file is one PutObject.
PART_BYTES = 16 * 1024 * 1024


class S3ContentStore:
    """`ContentStore` on one bucket. `client` makes the calls and `signer` (default: the same
    client) signs download URLs valid for `url_seconds`. Each is a boto3 client or a factory
    of one, called at first use (a function that never meets stored content then never builds
    an S3 client)."""

    def __init__(self, client: Any, bucket: str, url_seconds: int, signer: Any = None) -> None:
        self._make_client: Callable[[], Any] = client if callable(client) else lambda: client
        self._make_signer: Callable[[], Any] = (
            self._make_client if signer is None else signer if callable(signer) else lambda: signer
        )
        self._bucket = bucket
        self._url_seconds = url_seconds

    @cached_property
    def _s3(self) -> Any:
        return self._make_client()

    @cached_property
    def _signer(self) -> Any:
        return self._s3 if self._make_signer is self._make_client else self._make_signer()

    def put(self, task_id: str, name: str, body: bytes, media_type: str) -> None:
        self._s3.put_object(
            Bucket=self._bucket, Key=object_key(task_id, name), Body=body, ContentType=media_type
        )

    def put_stream(self, task_id: str, name: str, source: IO[bytes], media_type: str) -> int:
        first = read_full(source, PART_BYTES)
        if len(first) < PART_BYTES:
            self.put(task_id, name, first, media_type)
            return len(first)
        key = object_key(task_id, name)
        upload = self._s3.create_multipart_upload(
            Bucket=self._bucket, Key=key, ContentType=media_type
        )["UploadId"]
        try:
            parts: list[dict[str, Any]] = []
            size, chunk = 0, first
            while chunk:
                number = len(parts) + 1
                answer = self._s3.upload_part(
                    Bucket=self._bucket, Key=key, UploadId=upload, PartNumber=number, Body=chunk
                )
                parts.append({"ETag": answer["ETag"], "PartNumber": number})
                size += len(chunk)
                chunk = read_full(source, PART_BYTES)
            self._s3.complete_multipart_upload(
                Bucket=self._bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
            )
        except BaseException:
            self._s3.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload)
            raise
        return size

    def open(self, task_id: str, name: str) -> IO[bytes]:
        answer = self._s3.get_object(Bucket=self._bucket, Key=object_key(task_id, name))
        body: IO[bytes] = answer["Body"]
        return body

    def link(self, task_id: str, name: str) -> str:
        url: str = self._signer.generate_presigned_url(
            "get_object",
            Params={"Bucket": self._bucket, "Key": object_key(task_id, name)},
            ExpiresIn=self._url_seconds,
        )
        return url


def read_full(source: IO[bytes], size: int) -> bytes:
    """`size` bytes of `source`, fewer only at its end (a stream may return short reads)."""
    pieces, got = [], 0
    while got < size:
        piece = source.read(size - got)
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces)
