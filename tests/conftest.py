"""Shared fixtures. Prefect runs against one session-scoped test harness; the simulator's device
state lives in a per-session temp folder so tests never share locks with a user's runs (under
pytest-xdist each worker process is a session of its own: its own harness, folders and leases).

Real servers and workers for the slow stage are made here too, from tests/prefect_server.py: one
server per session (`stage_server`) on PostgreSQL, with the fleet set up once where a fleet test runs
(`fleet_server`), which every slow test of that process uses unless the server's own life is what it
checks; and a Prefect database migrated once
that the fresh PREFECT_HOMEs of those own servers start from.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

_SESSION_TMP = Path(tempfile.mkdtemp(prefix="kernelsweep-tests-"))
atexit.register(shutil.rmtree, _SESSION_TMP, ignore_errors=True)  # each test process its own; none left in /tmp
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")  # CLI subprocesses on a busy CI host
os.environ["KERNELSWEEP_SIM_STATE"] = str(_SESSION_TMP / "sim")
os.environ["KERNELSWEEP_LOCK_DIR"] = str(_SESSION_TMP / "leases")
sys.path.insert(0, str(Path(__file__).parent))  # test-only kernel definitions under tests/kernels

REPO = Path(__file__).resolve().parent.parent
SEEDS_FIXTURES = Path(__file__).parent / "fixtures"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Under `benchmarks/suite_cpu.py --by-test`: the test this process runs now, in the folder it names
    (one file per process), so that it can give each process's CPU to a test."""
    folder = os.environ.get("SUITE_CPU_TESTS")
    if not folder:
        return (yield)
    mine = Path(folder) / str(os.getpid())
    mine.write_text(item.nodeid)
    try:
        return (yield)
    finally:
        mine.write_text("")


@pytest.fixture(autouse=True)
def _no_stop_request_left_behind():
    """Under xdist a test cannot know which tests ran before it in its process: none may leave a stop
    request behind for the next flow there (`kernelsweep.flows.stopping.reset` clears one)."""
    yield
    stopping = sys.modules.get("kernelsweep.flows.stopping")
    assert stopping is None or not stopping.stop_requested(), "the test left a stop request behind"


@pytest.fixture(scope="module")
def moto_endpoint():
    """moto's S3 server on 127.0.0.1, spoken to over real HTTP."""
    from s3_server import moto_s3

    with moto_s3() as url:
        yield url


@pytest.fixture
def bucket(moto_endpoint, monkeypatch) -> str:
    """A fresh bucket, with dummy credentials and the endpoint in this test's environment only."""
    from s3_server import apply_env, aws_test_env, create_bucket

    apply_env(monkeypatch, aws_test_env(moto_endpoint))
    return create_bucket(moto_endpoint)


# Groups started first, in this order: xdist (--no-loadscope-reorder) gives the first groups one to each
# process, so the two fleet groups, minutes of fleet runs each on their process's server, run side by side
# (and, in the slow stage's four processes, beside the nights dataset's group).
FIRST_GROUPS = ("fleet", "fleet-ops", "nights")
# Then the slow stage's longest tests outside any group, longest first (in the stage of 2026-11-29: the demo
# 152 s, the killed sweep 129, the killed server 90, then 31-51 s each), as a scheduler packs jobs: the
# machine is busy throughout, so the stage ends when its last test does. In collection order the killed
# server's test started at 618 s and ran on alone for a minute after the other three processes had ended.
SLOW_WORDS = "mark.slow"  # in every module that holds a slow test (`pytest_ignore_collect`)
LONGEST_FIRST = (
    "test_fleet_demo.py",
    "test_reliability_kill.py",
    "test_server_recording.py",
    "test_security.py",
    "test_search_quality.py",
    "test_server_command.py",
    "test_server_database.py",
    "test_worker_interpreter.py",
    "test_compact_kill.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest = LONGEST_FIRST if slow_stage(config) else ()
    if not slow_stage(config):  # every module is collected here: hold the rule the slow stage collects by
        slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
        unseen = sorted(path.name for path in slow_modules if SLOW_WORDS not in path.read_text())
        if unseen:
            raise pytest.UsageError(
                f"{', '.join(unseen)}: slow tests marked without the words `{SLOW_WORDS}`, which the slow stage "
                "would not collect; mark them with pytest.mark.slow"
            )

    def rank(item: pytest.Item) -> int:
        marker = item.get_closest_marker("xdist_group")
        group = (marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None
        if group in FIRST_GROUPS:
            return FIRST_GROUPS.index(group)
        module = item.path.name
        return len(FIRST_GROUPS) + (longest.index(module) if module in longest else len(longest))

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> object:
    """Pytest rewrites each test module's asserts as it imports it, and keeps the rewrite beside the
    module unless bytecode writing is off (PYTHONDONTWRITEBYTECODE, set on this project's build
    machines): then every pytest process rewrote the suite's 130-odd modules again, 3.7 of the 10.6
    CPU-s its collection took. Writing is allowed while the suite's own files are collected, and only
    then: a module a test writes and imports while it runs is never cached (rewritten within the same
    second at the same size, it would be read stale)."""
    writes_off = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = writes_off


DEFAULT_PROCESSES, SLOW_PROCESSES = 2, 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two processes for the default stage (CPU-bound: a third only adds contention), four
    for the slow one, whose tests wait on servers, automations and slept latencies for minutes at a time
    while the other processes' tests use the idle core time (they share one server: `stage_server`)."""
    return SLOW_PROCESSES if slow_stage(config) else DEFAULT_PROCESSES


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The slow stage does not import the modules that hold no slow test: each of its four processes
    collected all 140-odd modules to deselect most of their tests. Every slow test is marked through
    `pytest.mark.slow` (or `mark.slow`), so a module without those words holds none; the default
    stage, which collects every module, fails on a slow test marked otherwise."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_") or not slow_stage(config):
        return None
    return SLOW_WORDS not in collection_path.read_text() or None


def slow_stage(config: pytest.Config) -> bool:
    """`pytest -m slow`: its session has a real server (`stage_server`) that the in-process flows share."""
    return config.getoption("markexpr") == "slow"


@pytest.fixture(scope="session")
def prefect_harness(request):
    """Prefect for flows run in this process: the slow stage's server, else Prefect's test harness."""
    if slow_stage(request.config):
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: request.getfixturevalue("stage_server").api_url}):
            yield
        return
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL
    from prefect.testing import utilities

    database = request.getfixturevalue("migrated_prefect_db")
    with pytest.MonkeyPatch.context() as patch:
        # The harness makes its SQLite file in a new folder; found there already migrated, the harness's
        # server skips Alembic's migration of an empty database: 6 s to start here instead of 15.
        patch.setattr(utilities, "mkdtemp", lambda: _seeded_folder(database))
        with utilities.prefect_test_harness(server_startup_timeout=120):
            url = PREFECT_SERVER_DATABASE_CONNECTION_URL.value()
            assert url.endswith(HARNESS_DATABASE), f"the harness's database is {url} now: seed that name instead"
            yield


HARNESS_DATABASE = "prefect-test.db"  # the file `prefect_test_harness` names in the folder it makes


def _seeded_folder(database: Path) -> str:
    folder = tempfile.mkdtemp()
    shutil.copyfile(database, Path(folder) / HARNESS_DATABASE)
    return folder


@pytest.fixture(scope="session")
def migrated_prefect_db(tmp_path_factory, worker_id) -> Path:
    """An empty Prefect database already at the newest schema, made once per test run (shared by the
    xdist workers; their controller starts making it while they start) by Prefect's own `prefect server
    database upgrade`. A fresh PREFECT_HOME seeded with a copy skips the Alembic migration of a new
    SQLite database at its first server start, several CPU seconds each time; the server still checks
    the schema and finds nothing to do."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent  # the run's folder, above each worker's own
    return _database_template(shared)


def _database_template(shared: Path) -> Path:
    """The template in `shared`, made under a lock by whichever process comes first."""
    home = shared / "prefect-db-template"
    with open(shared / "prefect-db-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / "complete").is_file():
            shutil.rmtree(home, ignore_errors=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            upgrade = [str(Path(sys.executable).parent / "prefect"), "server", "database", "upgrade", "-y"]
            done = subprocess.run(
                upgrade, env={**env, "PREFECT_HOME": str(home)}, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, done.stdout + done.stderr
            (home / "complete").touch()
    return home / "prefect.db"


def seed_prefect_home(home: Path, database: Path) -> Path:
    """`home` as a new PREFECT_HOME whose database (Prefect's default place for it) is a copy of `database`."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(database, home / "prefect.db")
    return home


@pytest.fixture
def prefect_home(tmp_path, migrated_prefect_db) -> Path:
    """A fresh PREFECT_HOME for a CLI or server subprocess, its database already migrated."""
    return seed_prefect_home(tmp_path / "prefect-home", migrated_prefect_db)


@pytest.hookimpl(trylast=True)  # after the temporary-path plugin's, whose folder the template goes in
def pytest_configure(config: pytest.Config) -> None:
    """An xdist controller starts, while its processes start and collect, what they all need first: in
    the whole default stage (the README's command) the migrated database template (`migrated_prefect_db`,
    for the in-process flows' harness), in the slow stage the stage's shared server (`stage_server`).
    They wait for it where a test first needs it. A run of chosen files makes the template only if a
    test asks for it (the session would otherwise wait for one it may never use)."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    if slow_stage(config):
        from prefect_server import SharedServer

        config.stash[_SHARED] = SharedServer.start()
        os.environ[SHARED_SERVER_ENV] = str(config.stash[_SHARED].address)
    elif config.args_source is pytest.Config.ArgsSource.TESTPATHS:
        basetemp = config._tmp_path_factory.getbasetemp()  # the workers' folders are in it (xdist's own use)
        config.stash[_TEMPLATE] = threading.Thread(target=_database_template, args=(basetemp,), name="db-template")
        config.stash[_TEMPLATE].start()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _TEMPLATE in config.stash:
        config.stash[_TEMPLATE].join()
    if _SHARED in config.stash:
        config.stash[_SHARED].stop()


SHARED_SERVER_ENV = "KERNELSWEEP_TEST_SHARED_SERVER"  # where the controller writes its server's address
_SHARED = pytest.StashKey["SharedServer"]()
_TEMPLATE = pytest.StashKey[threading.Thread]()


@pytest.fixture(scope="session")
def stage_server(tmp_path_factory):
    """The slow stage's real `prefect server start` on PostgreSQL (on SQLite a fleet's workers and flow
    runs met "database is locked" 503s): the in-process flows (`prefect_harness`) and the CLI's runs
    (`server_client_env`) of every test process share the one the xdist controller started, one server
    start and one migration for the stage instead of one for each test; a run without xdist starts its own."""
    from prefect_server import SharedServer, own_server

    address = os.environ.get(SHARED_SERVER_ENV)
    if address:
        with SharedServer.attach(Path(address)) as server:
            yield server
        return
    with own_server(tmp_path_factory.mktemp("server")) as server:
        yield server


@pytest.fixture(scope="session")
def fleet_server(tmp_path_factory):
    """A server of this process's own, on PostgreSQL, with the fleet's pools and deployments (`kernelsweep
    fleet up`, once, and only in a process that runs a fleet test), the report trigger off
    (`PrefectServer.reports`). Pools are global to a server, so each fleet group has its own: a host one
    group's test starts would take the other group's shards."""
    from prefect_server import fleet_up, own_server

    with own_server(tmp_path_factory.mktemp("fleet-server")) as server:
        fleet_up(server, REPO)
        server.reports(enabled=False)
        yield server


@pytest.fixture(scope="session")
def control(fleet_server):
    """The control pool's worker on this process's fleet server, for every module of the group: the
    fleet runs and the reports they trigger. One worker a group, as a fleet has one control host."""
    worker = fleet_server.start_worker("control", "kernelsweep-control", limit=4)
    try:
        fleet_server.wait_online(worker.name, worker.pool)
        yield worker
    finally:
        worker.stop()


@pytest.fixture
def server_client_env(stage_server, tmp_path) -> dict[str, str]:
    """What a CLI subprocess needs to run its flows on the session's server instead of starting its own."""
    return {"PREFECT_API_URL": stage_server.api_url, "PREFECT_HOME": str(tmp_path / "prefect-home")}


def write_spec(path: Path, body: str) -> Path:
    path.write_text(body)
    return path
