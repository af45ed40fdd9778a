"""Prove a results or artifact location can be written before a sweep spends hours on work.

A sweep that finds out at the end that its bucket does not exist, its credentials are missing or
its folder is read-only has lost every measurement. The probe writes a marker object and deletes
it: the same operations, with the same credentials, the writers will need. Any failure is a
UsageError (exit 2) naming the location, the problem and the fix, and the probe leaves nothing
behind, not even a folder it had to create. On S3 it also lists (a run's journal is found by
listing), so a writer without s3:ListBucket is stopped here too.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import boto3
from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError

from kernelsweep.errors import UsageError
from kernelsweep.stores import s3
from kernelsweep.stores.locations import Location, parse_location

MARKER_PREFIX = "_kernelsweep-probe"  # leading "_": dataset readers never list it


def probe_location(location: Location | str, what: str, flag: str) -> None:
    """`what` names the location for the user ("results", "artifact store"), `flag` the option to change it."""
    where = parse_location(location, f"{what} location", flag)
    if isinstance(where, s3.S3Location):
        _probe_s3(where, what, flag)
    else:
        _probe_folder(where.path, what, flag)


def _marker_name() -> str:
    return f"{MARKER_PREFIX}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _probe_folder(root: Path, what: str, flag: str) -> None:
    created: list[Path] = []
    try:
        for folder in reversed([root, *root.parents]):
            if not folder.exists():
                folder.mkdir()
                created.append(folder)
        marker = root / _marker_name()
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, b"kernelsweep write probe\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            marker.unlink(missing_ok=True)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(
            f"{what} folder {str(root)!r} cannot be written ({reason}); choose a writable folder with {flag}"
        ) from None
    finally:
        for folder in reversed(created):
            try:
                folder.rmdir()
            except OSError:
                pass


def _probe_s3(where: s3.S3Location, what: str, flag: str) -> None:
    uri = str(where)
    if boto3.session.Session().get_credentials() is None:
        raise UsageError(
            f"{what} {uri}: no AWS credentials found; configure the default chain (instance profile, "
            f"AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) or use a local folder with {flag}"
        )
    client = s3.make_client()
    key = where.key(_marker_name())
    try:
        client.put_object(Bucket=where.bucket, Key=key, Body=b"kernelsweep write probe\n")
        client.delete_object(Bucket=where.bucket, Key=key)
        client.list_objects_v2(Bucket=where.bucket, Prefix=key, MaxKeys=1)  # a run's journal is found by listing
    except ClientError as exc:
        code = s3.error_code(exc)
        fix = {
            "NoSuchBucket": f"bucket {where.bucket!r} does not exist; create it or pass another with {flag}",
            "AccessDenied": f"access denied; grant s3:PutObject, s3:DeleteObject and s3:ListBucket on {uri} "
            f"or pass {flag}",
        }.get(code, f"S3 answered {code or 'an error'}; check the bucket and your permissions, or pass {flag}")
        raise UsageError(f"{what} {uri}: cannot write a test object: {fix}") from None
    except (BotoCoreError, Boto3Error) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(f"{what} {uri}: S3 cannot be reached ({detail}); check the network and endpoint") from None
