"""S3 locations, the one boto3 client factory, and S3 failures translated once into StoreError.

Endpoints: boto3 itself honours `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (and the shared config
file) and switches to path-style addressing whenever an endpoint is configured, so the factory
only passes an explicit `endpoint_url` through. Credentials come from the default chain only
(instance profile on EC2); nothing here reads, takes or logs keys.

pyarrow's S3 filesystem ignores those variables, so `pyarrow_filesystem` is the one place that
reads them, to point the reader at the endpoint boto3 uses.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3
from boto3.exceptions import S3UploadFailedError
from botocore import exceptions as boto_errors
from botocore.config import Config

from kernelsweep.errors import StoreError, UsageError

SCHEME = "s3://"
S3Client = Any  # a botocore S3 client; its typed stubs (mypy-boto3-s3) are not a dependency
RETRY_MAX_ATTEMPTS = 10
MAX_POOL_CONNECTIONS = 32  # the sweep's point threads share one client and each upload uses several
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_NOT_RETRYABLE_CODES = {"AccessDenied", "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "404"}
_TRANSIENT = (
    boto_errors.ConnectionError,
    boto_errors.HTTPClientError,
    boto_errors.IncompleteReadError,
    boto_errors.ChecksumError,
    boto_errors.FlexibleChecksumError,
    boto_errors.CredentialRetrievalError,
    S3UploadFailedError,  # upload_file's wrapper around a part that still failed after boto's retries
)


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix without leading or trailing slashes ("" for the bucket root)."""

    bucket: str
    prefix: str

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def uri(self, key: str) -> str:
        return f"{SCHEME}{self.bucket}/{key}"

    def __str__(self) -> str:
        return self.uri(self.prefix)

    def child(self, relative: str) -> S3Location:
        return S3Location(self.bucket, self.key(relative))


def is_s3_uri(location: str) -> bool:
    return location.startswith(SCHEME)


def parse_s3_uri(uri: str) -> S3Location:
    """`s3://bucket/prefix` -> S3Location; a malformed URI is a user mistake, reported with the fix."""
    bucket, _, prefix = uri.removeprefix(SCHEME).partition("/")
    prefix = prefix.strip("/")
    if not is_s3_uri(uri) or not _BUCKET.match(bucket) or "//" in prefix:
        raise UsageError(f"{uri!r} is not an S3 location; write it as s3://bucket-name/optional/prefix")
    if {".", ".."} & set(prefix.split("/")):  # S3 keeps them as names; a console or a sync tool resolves them
        raise UsageError(
            f"{uri!r} has a '.' or '..' segment; write the S3 location as s3://bucket-name/optional/prefix"
        )
    return S3Location(bucket, prefix)


def make_client(endpoint_url: str | None = None) -> S3Client:
    """A thread-safe S3 client with standard retries (backoff and jitter on 5xx, throttling, timeouts)."""
    config = Config(
        retries={"mode": "standard", "max_attempts": RETRY_MAX_ATTEMPTS},
        max_pool_connections=MAX_POOL_CONNECTIONS,
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)


def error_code(exc: boto_errors.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(exc: Exception, action: str) -> StoreError:
    """One StoreError for any boto failure; `retryable` only when another attempt could succeed.

    boto3 has already retried transient failures by the time they get here; marking them retryable
    lets the task try again later, while a denied request or a missing bucket fails at once.
    """
    if isinstance(exc, boto_errors.ClientError):
        code = error_code(exc)
        return StoreError(
            f"{action}: S3 answered {code or 'an error'}",
            retryable=code not in _NOT_RETRYABLE_CODES,
            error_class=f"S3{code}" if code else None,
        )
    if isinstance(exc, boto_errors.NoCredentialsError):
        return StoreError(
            f"{action}: no AWS credentials; configure the default chain (instance profile, AWS_PROFILE or environment)"
        )
    return StoreError(f"{action}: {type(exc).__name__}", retryable=isinstance(exc, _TRANSIENT))


def configured_endpoint() -> str | None:
    """The S3 endpoint configured for boto3 through the environment (a test or private S3 server), if any."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def pyarrow_filesystem(location: S3Location, endpoint_url: str | None = None):
    """A pyarrow S3FileSystem reaching the endpoint and region boto3 would, with the same retry budget."""
    from pyarrow import fs

    endpoint_url = endpoint_url or configured_endpoint()
    retries = fs.AwsStandardS3RetryStrategy(max_attempts=RETRY_MAX_ATTEMPTS)
    if not endpoint_url:
        return fs.S3FileSystem(region=fs.resolve_s3_region(location.bucket), retry_strategy=retries)
    parts = urlsplit(endpoint_url)
    region = make_client(endpoint_url).meta.region_name
    return fs.S3FileSystem(
        endpoint_override=parts.netloc, scheme=parts.scheme or "https", region=region, retry_strategy=retries
    )
