"""Shared fixtures. Prefect runs against one session-scoped test harness; the simulator's device
state lives in a per-session temp folder so tests never share locks with a user's runs."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

_SESSION_TMP = Path(tempfile.mkdtemp(prefix="kernelsweep-tests-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")  # CLI subprocesses on a busy CI host
os.environ["KERNELSWEEP_SIM_STATE"] = str(_SESSION_TMP / "sim")
os.environ["KERNELSWEEP_LOCK_DIR"] = str(_SESSION_TMP / "leases")
sys.path.insert(0, str(Path(__file__).parent))  # test-only kernel definitions under tests/kernels

REPO = Path(__file__).resolve().parent.parent
SEEDS_FIXTURES = Path(__file__).parent / "fixtures"


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


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def fleet_server(tmp_path_factory):
    """A real `prefect server start` with the fleet's pools and deployments (`kernelsweep fleet up`)."""
    from prefect_server import fleet_server

    with fleet_server(tmp_path_factory.mktemp("fleet"), REPO) as server:
        yield server


def write_spec(path: Path, body: str) -> Path:
    path.write_text(body)
    return path
