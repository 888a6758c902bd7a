"""The object store, through boto3: a bucket of an S3-compatible server, and its failures as typed errors.

Credentials come the way boto3 finds them (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE with
AWS_SHARED_CREDENTIALS_FILE, a web identity, an instance role); nothing here reads, prints or logs them.
S3-compatible servers (MinIO, Ceph, moto) are addressed path-style (`ENDPOINT/BUCKET/KEY`).
Every failure becomes a `BackupFailed` whose reason an operator can act on (node/errors.py BackupReason).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from node.errors import BackupFailed, BackupReason

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef, ObjectIdentifierTypeDef

DENIED = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "403"}
)
MISSING_BUCKET = frozenset({"NoSuchBucket"})
MISSING_KEY = frozenset({"NoSuchKey", "404", "NoSuchUpload"})
DELETE_BATCH = 1000  # DeleteObjects takes at most this many keys


def connect(endpoint: str | None, region: str | None) -> S3Client:
    """A client for `endpoint` (None: AWS's own, or AWS_ENDPOINT_URL), path-style, bounded retries."""
    config = Config(
        s3={"addressing_style": "path"},
        retries={"max_attempts": 4, "mode": "standard"},
        connect_timeout=10,
        read_timeout=120,
    )
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=endpoint or None, region_name=region or None, config=config)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(exc: Exception, what: str) -> BackupFailed:
    """The typed failure of an object-store call (`what` says which, e.g. "list s3://b/p")."""
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return BackupFailed(BackupReason.ACCESS_DENIED, f"{what}: no usable credentials ({exc})")
    if isinstance(exc, ClientError):
        code = error_code(exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if code in MISSING_BUCKET:
            return BackupFailed(BackupReason.BUCKET_MISSING, f"{what}: the bucket does not exist")
        if code in DENIED or status == 403:
            return BackupFailed(BackupReason.ACCESS_DENIED, f"{what}: refused ({code}); check the credentials")
        if status >= 500:
            return BackupFailed(BackupReason.STORAGE_UNREACHABLE, f"{what}: the server failed ({code}, {status})")
        return BackupFailed(BackupReason.STORAGE_ERROR, f"{what}: {code or status}")
    if isinstance(exc, BotoCoreError):
        return BackupFailed(BackupReason.STORAGE_UNREACHABLE, f"{what}: {exc}")
    return BackupFailed(BackupReason.STORAGE_ERROR, f"{what}: {exc}")


@contextmanager
def calls(what: str) -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise translate(exc, what) from None


class Bucket:
    """One bucket; every method raises BackupFailed (never a boto exception)."""

    def __init__(self, client: S3Client, bucket: str) -> None:
        self.client = client
        self.name = bucket

    def check(self) -> None:
        """The bucket exists and these credentials may use it (HeadBucket answers 404 without a code)."""
        try:
            self.client.head_bucket(Bucket=self.name)
        except ClientError as exc:
            if error_code(exc) in ("404", "NoSuchBucket"):
                raise BackupFailed(BackupReason.BUCKET_MISSING, f"bucket {self.name!r} does not exist") from None
            raise translate(exc, f"bucket {self.name!r}") from None
        except BotoCoreError as exc:
            raise translate(exc, f"bucket {self.name!r}") from None

    def objects(self, prefix: str) -> list[tuple[str, int, datetime]]:
        out: list[tuple[str, int, datetime]] = []
        with calls(f"list s3://{self.name}/{prefix}"):
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix):
                out.extend((o["Key"], int(o["Size"]), o["LastModified"]) for o in page.get("Contents", []))
        return out

    def get(self, key: str) -> bytes | None:
        """The object's bytes; None when it does not exist."""
        try:
            return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()
        except ClientError as exc:
            if error_code(exc) in MISSING_KEY:
                return None
            raise translate(exc, f"read s3://{self.name}/{key}") from None
        except BotoCoreError as exc:
            raise translate(exc, f"read s3://{self.name}/{key}") from None

    def put(self, key: str, data: bytes) -> None:
        with calls(f"write s3://{self.name}/{key}"):
            self.client.put_object(Bucket=self.name, Key=key, Body=data)

    def stream(self, key: str, start: int) -> Any:
        """The object's bytes from offset `start` on, as a readable stream (`.read(n)`, `.close()`)."""
        with calls(f"read s3://{self.name}/{key}"):
            return self.client.get_object(Bucket=self.name, Key=key, Range=f"bytes={start}-")["Body"]

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), DELETE_BATCH):
            batch: list[ObjectIdentifierTypeDef] = [{"Key": k} for k in keys[i : i + DELETE_BATCH]]
            with calls(f"delete in s3://{self.name}"):
                reply = self.client.delete_objects(Bucket=self.name, Delete={"Objects": batch, "Quiet": True})
            errors = reply.get("Errors", [])
            if errors:
                first = errors[0]
                raise BackupFailed(
                    BackupReason.ACCESS_DENIED if first.get("Code") == "AccessDenied" else BackupReason.STORAGE_ERROR,
                    f"delete s3://{self.name}/{first.get('Key')}: {first.get('Code')} ({len(errors)} keys not deleted)",
                )

    def uploads(self, prefix: str) -> list[tuple[str, str, datetime]]:
        """Multipart uploads begun and neither completed nor aborted: (key, upload id, initiated)."""
        out: list[tuple[str, str, datetime]] = []
        with calls(f"list uploads in s3://{self.name}/{prefix}"):
            pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.name, Prefix=prefix)
            for page in pages:
                out.extend((u["Key"], u["UploadId"], u["Initiated"]) for u in page.get("Uploads", []))
        return out

    def abort(self, key: str, upload_id: str) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.name, Key=key, UploadId=upload_id)
        except ClientError as exc:
            if error_code(exc) not in MISSING_KEY:  # aborted meanwhile: what was wanted
                raise translate(exc, f"abort the upload of s3://{self.name}/{key}") from None
        except BotoCoreError as exc:
            raise translate(exc, f"abort the upload of s3://{self.name}/{key}") from None


class Multipart:
    """One multipart upload: parts in order, then complete (the object appears whole) or abort."""

    def __init__(self, bucket: Bucket, key: str) -> None:
        self.bucket = bucket
        self.key = key
        self.parts: list[CompletedPartTypeDef] = []
        with calls(f"begin the upload of s3://{bucket.name}/{key}"):
            self.upload_id = bucket.client.create_multipart_upload(Bucket=bucket.name, Key=key)["UploadId"]

    def add(self, data: bytes) -> None:
        number = len(self.parts) + 1
        with calls(f"upload part {number} of s3://{self.bucket.name}/{self.key}"):
            reply = self.bucket.client.upload_part(
                Bucket=self.bucket.name, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=data
            )
        self.parts.append({"PartNumber": number, "ETag": reply["ETag"]})

    def complete(self) -> None:
        with calls(f"complete the upload of s3://{self.bucket.name}/{self.key}"):
            self.bucket.client.complete_multipart_upload(
                Bucket=self.bucket.name, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": self.parts}
            )

    def abort(self) -> None:
        self.bucket.abort(self.key, self.upload_id)
