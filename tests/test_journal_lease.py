"""A live run's journal is never adopted (fast variants; the two-CLIs-at-once test is in
test_reliability_live.py).

The lease holder here is a real other process: a few lines of Python that take the lease through
kernelsweep.results.journal_lease, print "held" and wait. On S3 (moto over HTTP) the lease is a
heartbeat object written only if absent, taken over only once expired or its holder is known dead.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, date, datetime, timedelta

import boto3
import pytest
from specs import VECTOR_ADD, sim_spec

from kernelsweep.results import journal, journal_lease
from kernelsweep.results.journal import plan_resume, run_key
from kernelsweep.sweepspec.expansion import expand

NOW = datetime(2026, 11, 26, tzinfo=UTC)
# A process holding a journal's lock file the way journal_lease does (flock, and its note), without
# importing kernelsweep (which costs two seconds a process here).
HOLDER = textwrap.dedent(
    """
    import fcntl, json, os, socket, sys
    os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    note = {"host": socket.gethostname(), "pid": os.getpid(), "since": "2026-11-26T00:00:00+00:00", "what": "run"}
    os.write(fd, json.dumps(note).encode() if len(sys.argv) < 3 else sys.argv[2].encode())
    print("held", flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture
def holder():
    """Starts a process that holds a lease until the test ends (its stdin closes)."""
    started: list[subprocess.Popen] = []

    def hold(results: str, key: str, run_id: str | None = None, note: str | None = None) -> subprocess.Popen:
        path = journal_lease.open_lease(results, key, run_id)[0]
        argv = [sys.executable, "-I", "-c", HOLDER, path, *([note] if note else [])]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in started:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream:
                stream.close()


def _interrupted(results: str, key: str, points) -> journal.Journal:
    run = journal.begin(results, plan_resume(results, key, points), str(uuid.uuid4()), date(2026, 11, 26), "live", NOW)
    run.release()
    return run


def test_a_second_run_of_a_spec_is_refused_at_once_naming_the_live_one(tmp_path, holder):
    spec = sim_spec(tmp_path, [VECTOR_ADD], name="live")
    points, key = expand(spec), run_key(spec)
    first = holder(spec.results, key)
    with pytest.raises(journal_lease.RunIsLive) as refused:
        plan_resume(spec.results, key, points, find=True)
    message = refused.value.message
    assert f"pid {first.pid} on {socket.gethostname()}" in message and "\n" not in message
    assert not (tmp_path / "results" / "_journal" / key / "run.json").exists()


def test_a_holder_whose_note_cannot_be_read_is_named_by_its_pid_on_this_host(tmp_path, holder):
    """Issue 41: a holder that could not write its note (a full disk), or whose note was spoilt, made the
    refusal say "pid 0 on an unknown host"; the kernel's table of locks names the process."""
    spec = sim_spec(tmp_path, [VECTOR_ADD], name="live")
    points, key = expand(spec), run_key(spec)
    first = holder(spec.results, key, note="not a note")
    with pytest.raises(journal_lease.RunIsLive) as refused:
        plan_resume(spec.results, key, points, find=True)
    message = refused.value.message
    assert f"pid {first.pid} on {socket.gethostname()}" in message and "pid 0" not in message, message


def test_a_live_runs_journal_is_neither_resumed_nor_removed(tmp_path, holder):
    spec = sim_spec(tmp_path, [VECTOR_ADD], name="live")
    points, key = expand(spec), run_key(spec)
    run = _interrupted(spec.results, key, points)
    live = holder(spec.results, key, run.run_id)
    with pytest.raises(journal_lease.RunIsLive) as refused:
        plan_resume(spec.results, key, points, run_id=run.run_id)
    assert f"pid {live.pid}" in refused.value.message
    (tmp_path / "results" / "_journal" / key / run.run_id / "run.json").unlink()  # looks finished, but is live
    plan_resume(spec.results, key, points, find=False)
    journal.find_unfinished(spec.results, key)
    assert (tmp_path / "results" / "_journal" / key / run.run_id).is_dir()


def test_a_lease_dies_with_its_holder(tmp_path, holder):
    spec = sim_spec(tmp_path, [VECTOR_ADD], name="live")
    points, key = expand(spec), run_key(spec)
    run = _interrupted(spec.results, key, points)
    live = holder(spec.results, key, run.run_id)
    live.kill()
    live.wait()
    plan = plan_resume(spec.results, key, points, run_id=run.run_id)
    assert plan.resumed is not None and plan.lease is not None
    journal_lease.release(plan.lease)


def _s3_lease(moto_endpoint: str, bucket: str, key: str, **note) -> None:
    body = {"host": "other-host", "pid": 4242, "since": "2026-11-26T00:00:00+00:00", "what": "run x"} | note
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    client.put_object(Bucket=bucket, Key=f"results/_journal/{key}.lease.json", Body=json.dumps(body).encode())


def test_an_s3_heartbeat_holds_until_it_expires(bucket, moto_endpoint):
    results, key = f"s3://{bucket}/results", "live-0123456789abcdef"
    soon = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()
    _s3_lease(moto_endpoint, bucket, key, expires_at=soon)
    uri, lease = journal_lease.open_lease(results, key)
    with pytest.raises(journal_lease.RunIsLive) as refused:
        journal_lease.acquire(uri, lease, "a run of this spec")
    assert "pid 4242 on other-host" in refused.value.message and soon[:19] in refused.value.message
    _s3_lease(moto_endpoint, bucket, key, expires_at=(datetime.now(UTC) - timedelta(seconds=1)).isoformat())
    journal_lease.acquire(uri, lease, "a run of this spec")
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    try:
        note = json.loads(client.get_object(Bucket=bucket, Key=f"results/_journal/{key}.lease.json")["Body"].read())
        assert note["pid"] == os.getpid() and datetime.fromisoformat(note["expires_at"]) > datetime.now(UTC)
    finally:
        journal_lease.release(uri)
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix="results/_journal/")


def test_an_s3_lease_of_a_dead_process_of_this_host_is_taken_over(bucket, moto_endpoint):
    results, key = f"s3://{bucket}/results", "live-0123456789abcdef"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    soon = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()
    _s3_lease(moto_endpoint, bucket, key, host=socket.gethostname(), pid=int(gone.stdout), expires_at=soon)
    uri, lease = journal_lease.open_lease(results, key)
    journal_lease.acquire(uri, lease, "a run of this spec")
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    try:
        note = json.loads(client.get_object(Bucket=bucket, Key=f"results/_journal/{key}.lease.json")["Body"].read())
        assert (note["pid"], note["host"]) == (os.getpid(), socket.gethostname())  # the dead one's note replaced
    finally:
        journal_lease.release(uri)


def test_a_run_refused_between_the_holders_lock_and_its_note_waits_for_the_note(tmp_path, monkeypatch):
    """The holder takes the flock, then writes who it is: a second run reading in between (CI once
    printed "pid 0 on an unknown host") waits a moment and names the holder."""
    import fcntl
    import threading

    path = tmp_path / ".live"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # locked, no note yet
    me = journal_lease.Holder("other-host", 4242, "2026-11-27T05:00:00", "a run of this spec")
    read_once, pread = threading.Event(), os.pread

    def reading(*args: int) -> bytes:
        note = pread(*args)
        read_once.set()
        return note

    monkeypatch.setattr(journal_lease.os, "pread", reading)
    found: list[journal_lease.Holder | None] = []
    refused = threading.Thread(target=lambda: found.append(journal_lease._FolderLease(path).try_acquire(me)))
    refused.start()
    assert read_once.wait(30)  # the refused run has read the empty note (the old code returned with it)
    os.pwrite(fd, me.to_json(), 0)
    refused.join(30)
    os.close(fd)
    [holder] = found
    assert holder is not None and (holder.pid, holder.host) == (4242, "other-host")
