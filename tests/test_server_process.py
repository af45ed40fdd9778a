"""The command every server kernelsweep starts runs (kernelsweep.flows.server_process): Prefect's own
command line, with a `DateTime` minus a plain datetime computed as Python 3.13's Prefect computes it.
Checked in a fresh interpreter: the fix changes Prefect's class for the whole process it runs in."""

from __future__ import annotations

import json
import subprocess
import sys

import prefect
import pytest

from kernelsweep.flows import server

# Subtractions a server makes (asyncpg's encoder subtracts PostgreSQL's epoch, an aware plain datetime),
# and ones left to pendulum; each shown as the result's type and its value in microseconds, as Prefect
# ships them and then with the fix in place.
CHECK = """
import datetime, json
import pendulum
from prefect.types._datetime import DateTime

utc = datetime.timezone.utc
now = DateTime(2026, 11, 29, 7, 30, 5, 123456, tzinfo=pendulum.UTC)
def show(value):
    kind = type(value).__module__ + "." + type(value).__qualname__
    if isinstance(value, datetime.timedelta):
        return [kind, (value.days * 86400 + value.seconds) * 10**6 + value.microseconds]
    return [kind, value.isoformat()]
def cases():
    return {name: show(value) for name, value in {
        "epoch": now - datetime.datetime(2000, 1, 1, tzinfo=utc),
        "later epoch": DateTime(1999, 1, 1, tzinfo=pendulum.UTC) - datetime.datetime(2000, 1, 1, tzinfo=utc),
        "offset": now - datetime.datetime(2026, 11, 29, 9, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
        "pendulum": now - DateTime(2026, 11, 28, tzinfo=pendulum.UTC),
        "timedelta": now - datetime.timedelta(seconds=5),
    }.items()}
shipped = cases()
from kernelsweep.flows import server_process
assert server_process.install()  # a second call keeps the one fix
print(json.dumps({"shipped": shipped, "fixed": cases()}))
"""


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="Prefect has no pendulum DateTime to fix on 3.13")
def test_a_datetime_minus_a_plain_datetime_is_the_same_plain_timedelta_and_the_rest_is_pendulums():
    done = subprocess.run([sys.executable, "-P", "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    subtractions = json.loads(done.stdout)
    shipped, fixed = subtractions["shipped"], subtractions["fixed"]
    for name in ("epoch", "later epoch", "offset"):
        assert shipped[name][0] != "datetime.timedelta"  # pendulum's Interval, as Prefect 3.9 ships it
        assert fixed[name] == ["datetime.timedelta", shipped[name][1]], name  # the same value, plain
    assert fixed["pendulum"] == shipped["pendulum"]  # a pendulum operand: pendulum's own result
    assert fixed["timedelta"] == shipped["timedelta"]  # a moment minus a duration: a moment, as before


def test_the_command_is_prefects_command_line():
    done = subprocess.run(
        [sys.executable, "-P", "-m", server.SERVER_PROCESS, "version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert prefect.__version__ in done.stdout


@pytest.mark.parametrize(
    ("command", "app_imported"), [(["version"], True), (["server", "services", "ls"], False)], ids=["api", "services"]
)
def test_the_command_holds_the_servers_modules_frozen_with_the_collector_on(command, app_imported):
    """Run as `-m`, the command imports what its process serves before Prefect parses its arguments,
    with the collector paused, and freezes it (kernelsweep.toolchain.preload): the API's app, except in a
    services process, which serves no API."""
    show = (
        "import atexit, gc, json, runpy, sys\n"
        "atexit.register(lambda: print(json.dumps([gc.isenabled(), gc.get_freeze_count(),"
        " 'prefect.server.api.server' in sys.modules])))\n"
        f"sys.argv = ['prefect', *{command!r}]\n"
        f"runpy.run_module({server.SERVER_PROCESS!r}, run_name='__main__', alter_sys=True)\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", show], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    enabled, frozen, imported = json.loads(done.stdout.splitlines()[-1])
    assert enabled and frozen > 100_000 and imported == app_imported
