from __future__ import annotations

import fcntl
import logging
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kernelsweep.errors import CaptureError, DeviceBusyError, UsageError
from kernelsweep.locks import CoreLease, CoreLeaser

REPO = Path(__file__).resolve().parents[1]


def _raw_lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # also drops the probe's lock


def test_flock_conflicts_between_fds_of_one_process(tmp_path):
    # The leaser relies on this Linux behaviour to exclude threads of one process.
    fd = _raw_lock(tmp_path / "x.lock")
    try:
        assert not _is_free(tmp_path / "x.lock")
    finally:
        os.close(fd)
    assert _is_free(tmp_path / "x.lock")


def test_same_thread_second_acquire_is_refused_until_release(tmp_path):
    leaser = CoreLeaser(tmp_path, [0])
    held = leaser.try_acquire("first")
    assert held is not None and held.lease == CoreLease(0, (0,))
    assert "first" in (tmp_path / "nc0.lock").read_text()
    assert str(os.getpid()) in (tmp_path / "nc0.lock").read_text()
    assert leaser.try_acquire() is None
    held.release()
    held.release()  # idempotent
    again = leaser.try_acquire()
    assert again is not None
    again.release()


def test_threads_never_share_a_core(tmp_path):
    leaser = CoreLeaser(tmp_path, [0, 1])
    guard = threading.Lock()
    holders = {0: 0, 1: 0}
    used: set[int] = set()
    violations: list[str] = []
    done: list[int] = []
    n_threads, n_leases = 16, 20

    def worker(i: int) -> None:
        for _ in range(n_leases):
            with leaser.lease(timeout_seconds=60, waiting_for=f"t{i}") as lease:
                with guard:
                    holders[lease.logical_core] += 1
                    used.add(lease.logical_core)
                    if holders[lease.logical_core] > 1:
                        violations.append(f"core {lease.logical_core} had 2 holders")
                threading.Event().wait(0.0005)  # widen the window an overlap would need
                with guard:
                    holders[lease.logical_core] -= 1
        with guard:
            done.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert violations == []
    assert sorted(done) == list(range(n_threads))
    assert holders == {0: 0, 1: 0}
    assert used <= {0, 1}


def test_lock_held_by_child_process_is_dropped_when_it_is_killed(tmp_path):
    child_code = textwrap.dedent(
        f"""
        import sys
        from kernelsweep.locks import CoreLeaser
        with CoreLeaser({str(tmp_path)!r}, [0]).lease(waiting_for="child"):
            print("ready", flush=True)
            sys.stdin.read()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", child_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = child.stdout.readline()
        assert line == "ready\n", child.stderr.read() if child.poll() is not None else line
        leaser = CoreLeaser(tmp_path, [0])
        assert leaser.try_acquire() is None
        assert f"pid={child.pid}" in (tmp_path / "nc0.lock").read_text()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdin.close()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    held = leaser.try_acquire()  # no waiting: the kernel released the dead holder's flock
    assert held is not None
    held.release()


def test_lnc2_logical_core_needs_both_physical_cores(tmp_path):
    leaser = CoreLeaser(tmp_path, [0, 1], lnc=2)
    assert leaser.physical_cores(0) == (0, 1) and leaser.physical_cores(1) == (2, 3)
    other = _raw_lock(tmp_path / "nc1.lock")  # someone else holds physical core 1
    try:
        held = leaser.try_acquire()
        assert held is not None
        assert held.lease == CoreLease(1, (2, 3)) and held.lease.visible_cores == "1"
        assert not _is_free(tmp_path / "nc2.lock") and not _is_free(tmp_path / "nc3.lock")
        assert leaser.try_acquire() is None
        assert _is_free(tmp_path / "nc0.lock")  # the failed attempt on logical 0 let physical 0 go
        held.release()
    finally:
        os.close(other)
    held = leaser.try_acquire()
    assert held is not None and held.lease == CoreLease(0, (0, 1)) and held.lease.visible_cores == "0"
    held.release()


def test_leasers_with_different_lnc_exclude_each_other(tmp_path):
    lnc2 = CoreLeaser(tmp_path, [0], lnc=2)  # physical 0,1
    lnc1 = CoreLeaser(tmp_path, [1])  # physical 1
    held = lnc1.try_acquire()
    assert held is not None
    assert lnc2.try_acquire() is None
    held.release()
    held = lnc2.try_acquire()
    assert held is not None
    held.release()


def test_a_wait_that_times_out_fails_for_good(tmp_path, caplog):
    """The wait already lasted the whole timeout: retrying it would only multiply the hang."""
    leaser = CoreLeaser(tmp_path, [0, 1])
    a, b = leaser.try_acquire(), leaser.try_acquire()
    assert a is not None and b is not None
    try:
        with (
            caplog.at_level(logging.INFO, logger="kernelsweep.locks"),
            pytest.raises(DeviceBusyError) as info,
            leaser.lease(timeout_seconds=0.2, waiting_for="point-7"),
        ):
            pytest.fail("lease granted while every core is held")
    finally:
        a.release()
        b.release()
    err = info.value
    assert err.retryable is False and err.error_class == "LeaseTimeout"
    assert "no NeuronCore free after 0.2 s" in err.message and "cores 0,1" in err.message
    assert "core 0: this process" in err.message  # who holds them, even when it is ourselves
    waiting = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert len(waiting) == 1 and "point-7" in waiting[0] and "2 NeuronCore" in waiting[0]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # our own threads: no alarm


def _foreign_holder(lock_dir: Path, cores: list[int]) -> subprocess.Popen:
    """Another process holding `cores` (a wedged capture, say), started by its own command line."""
    code = textwrap.dedent(
        f"""
        import sys
        from kernelsweep.locks import CoreLeaser
        held = [CoreLeaser({str(lock_dir)!r}, [c]).try_acquire("wedged") for c in {cores!r}]
        assert all(held)
        print("ready", flush=True)
        sys.stdin.read()
        """
    )
    script = lock_dir / "wedge.py"
    script.write_text(code)
    child = subprocess.Popen(
        [sys.executable, str(script), "--wedged-capture"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert child.stdout.readline() == "ready\n"
    return child


def test_a_wait_names_the_core_and_the_process_holding_it_and_gives_up(tmp_path, caplog):
    child = _foreign_holder(tmp_path, [0, 1])
    try:
        leaser = CoreLeaser(tmp_path, [0, 1], wait_timeout_seconds=0.3)
        with caplog.at_level(logging.WARNING, logger="kernelsweep.locks"), pytest.raises(DeviceBusyError) as info:
            with leaser.lease(waiting_for="mlp-trn2"):  # the leaser's own timeout applies
                pytest.fail("lease granted while another process holds every core")
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()
    notice = [r.getMessage() for r in caplog.records]
    assert len(notice) == 1, notice
    assert f"core 0: pid {child.pid} ({sys.executable} {tmp_path / 'wedge.py'} --wedged-capture)" in notice[0]
    assert "mlp-trn2" in notice[0] and "giving up after 0.3 s" in notice[0]
    assert info.value.error_class == "LeaseTimeout" and f"pid {child.pid}" in info.value.message


def test_stopping_ends_a_wait_at_once(tmp_path):
    stop = threading.Event()
    leaser = CoreLeaser(tmp_path, [0], stop=stop)  # no timeout: only the stop can end this wait
    blocker = leaser.try_acquire()
    assert blocker is not None
    outcome: list[BaseException] = []

    def waiter() -> None:
        try:
            with leaser.lease(waiting_for="p"):
                pass
        except DeviceBusyError as exc:
            outcome.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    stop.set()
    t.join(10)
    blocker.release()
    assert not t.is_alive() and len(outcome) == 1 and "stopped while waiting" in outcome[0].message


def test_the_lock_folder_is_private_and_lock_files_are_never_followed(tmp_path):
    made = tmp_path / "made" / "leases"
    CoreLeaser(made, [0])
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700  # made private

    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o755)
    with pytest.raises(UsageError, match="is open to other users"):
        CoreLeaser(loose, [0])
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o755  # refused, never changed
    os.chmod(loose, 0o700)

    link = tmp_path / "link"
    link.symlink_to(loose)
    with pytest.raises(UsageError, match="not a folder"):
        CoreLeaser(link, [0])

    target = tmp_path / "victim"
    target.write_text("precious\n")
    (loose / "nc0.lock").symlink_to(target)  # a planted link must not be opened, let alone truncated
    with pytest.raises(CaptureError, match="cannot be opened safely") as planted:
        CoreLeaser(loose, [0]).try_acquire()
    assert planted.value.error_class == "UnsafeLeaseFile" and target.read_text() == "precious\n"


def test_folders_and_lock_files_of_another_user_are_refused(tmp_path):
    other = 65534 if os.geteuid() == 0 else 0  # nobody when we are root, root when we are not
    theirs = tmp_path / "theirs"
    if os.geteuid() == 0:
        theirs.mkdir(mode=0o700)
        os.chown(theirs, other, other)
    else:
        theirs = Path("/")
    with pytest.raises(UsageError, match=f"belongs to uid {other}"):
        CoreLeaser(theirs, [0])
    if os.geteuid() == 0:  # a lock file someone else owns inside our folder
        mine = tmp_path / "mine"
        CoreLeaser(mine, [0])
        (mine / "nc0.lock").touch()
        os.chown(mine / "nc0.lock", other, other)
        with pytest.raises(CaptureError, match="not your own regular file"):
            CoreLeaser(mine, [0]).try_acquire()


def test_waiting_lease_gets_the_core_once_released(tmp_path):
    leaser = CoreLeaser(tmp_path, [0])
    blocker = leaser.try_acquire()
    assert blocker is not None
    started_waiting, got = threading.Event(), []

    class Signal(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("waiting"):
                started_waiting.set()

    logger = logging.getLogger("kernelsweep.locks")
    handler, old_level = Signal(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:

        def waiter() -> None:
            with leaser.lease(timeout_seconds=30, waiting_for="p1") as lease:
                got.append(lease)

        t = threading.Thread(target=waiter)
        t.start()
        assert started_waiting.wait(10)
        blocker.release()
        t.join(30)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert got == [CoreLease(0, (0,))]


def test_lease_released_when_body_raises(tmp_path):
    leaser = CoreLeaser(tmp_path, [0])
    with pytest.raises(RuntimeError), leaser.lease(timeout_seconds=0):
        raise RuntimeError("capture failed")
    held = leaser.try_acquire()
    assert held is not None
    held.release()


def test_forked_child_does_not_keep_the_lease(tmp_path):
    leaser = CoreLeaser(tmp_path, [0])
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    with leaser.lease(timeout_seconds=0):
        pid = os.fork()
        if pid == 0:  # child: report it runs (at-fork hooks done), outlive the parent's lease
            os.write(ready_w, b"r")
            os.read(go_r, 1)
            os._exit(0)
        assert os.read(ready_r, 1) == b"r"
    try:
        held = leaser.try_acquire()
        assert held is not None, "forked child still holds the parent's lock"
        held.release()
    finally:
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)


@pytest.mark.parametrize(("cores", "lnc"), [([], 1), ([0, 0], 1), ([-1], 1), ([0], 0)])
def test_leaser_rejects_bad_config(tmp_path, cores, lnc):
    with pytest.raises(ValueError):
        CoreLeaser(tmp_path, cores, lnc=lnc)
