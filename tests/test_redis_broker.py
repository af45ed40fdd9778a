"""kernelsweep.flows.redis_broker on a real Redis (Debian's redis-server), through Prefect's own
messaging factories, beside prefect-redis's broker: the same messages, in the same order, in fewer
round trips (what docs/fleet.md measures on the scaled-out server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from prefect.server.utilities import messaging
from prefect.settings import PREFECT_MESSAGING_BROKER, temporary_settings
from prefect_redis.client import clear_cached_clients, get_async_redis_client
from prefect_redis.messaging import _stream_key
from prefect_server import bench_servers
from redis import Redis as Client

from kernelsweep.flows import redis_broker

REPO = Path(__file__).resolve().parents[1]
OURS, PREFECTS = "kernelsweep.flows.redis_broker", "prefect_redis.messaging"
MESSAGES = 40


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    with bench_servers().redis() as broker:
        yield broker.port


@pytest.fixture
def redis_client(redis_port: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    """A fresh database each test; prefect-redis reads its URL from the environment."""
    monkeypatch.setenv("PREFECT_REDIS_MESSAGING_URL", f"redis://127.0.0.1:{redis_port}/0")
    with Client(host="127.0.0.1", port=redis_port) as client:
        client.flushall()
        yield client


@asynccontextmanager
async def _closing_clients() -> AsyncIterator[None]:
    """prefect-redis keeps a client per event loop: close this loop's before `asyncio.run` closes it."""
    try:
        yield
    finally:
        await get_async_redis_client().aclose()
        await clear_cached_clients()


def _stat(client: Client, section: str, field: str) -> int:
    return int(client.info(section).get(field, 0))


def _xread_calls(client: Client) -> int:
    return int(client.info("commandstats").get("cmdstat_xread", {}).get("calls", 0))


def _publish_and_read(broker: str, client: Client) -> tuple[list[tuple[str, dict]], int, int]:
    """Publish MESSAGES events through Prefect's factory with `broker`, read them back through an
    ephemeral subscription (as the API's event distributor does); what was read, and the round trips
    Redis saw for the second batch of five published and for the whole read."""

    async def run() -> tuple[list[tuple[str, dict]], int, int]:
        received: list[tuple[str, dict]] = []

        async def handler(message: messaging.Message) -> None:
            received.append((message.data, dict(message.attributes)))
            if len(received) == MESSAGES:
                raise messaging.StopConsumer(ack=True)

        async with _closing_clients(), messaging.ephemeral_subscription("events") as consumer_kwargs:
            consumer = messaging.create_consumer(**consumer_kwargs)
            async with messaging.create_publisher("events") as publisher:
                reads = batch_reads = 0
                for index in range(MESSAGES):  # flushed five at a time (prefect-redis's default batch)
                    if index == 5:  # the connection is open by now: count one batch's round trips alone
                        reads = _stat(client, "stats", "total_reads_processed")
                    await publisher.publish_data(f"event {index}".encode(), {"index": str(index)})
                    if index == 9:
                        batch_reads = _stat(client, "stats", "total_reads_processed") - reads - 1  # this INFO's own
            xreads = _xread_calls(client)
            await asyncio.wait_for(consumer.run(handler), timeout=60)
            return received, batch_reads, _xread_calls(client) - xreads

    with temporary_settings(updates={PREFECT_MESSAGING_BROKER: broker}):
        return asyncio.run(run())


@pytest.mark.slow
def test_a_batch_is_published_in_one_round_trip_and_the_events_read_back_in_one(redis_client):
    ours, ours_batch_reads, ours_xreads = _publish_and_read(OURS, redis_client)
    redis_client.flushall()
    theirs, their_batch_reads, their_xreads = _publish_and_read(PREFECTS, redis_client)

    expected = [(f"event {i}", {"index": str(i)}) for i in range(MESSAGES)]
    assert ours == theirs == expected
    assert their_batch_reads >= 5 and their_xreads >= MESSAGES  # prefect-redis: a round trip an event, each way
    assert ours_batch_reads <= 2 and ours_xreads <= 2


@pytest.mark.slow
def test_an_event_published_twice_is_sent_once_and_one_that_failed_can_be_sent_again(redis_client):
    async def run() -> list[str]:
        async with _closing_clients():
            return await publish()

    def publisher() -> messaging.Publisher:
        return messaging.create_publisher("events", deduplicate_by="id")

    async def publish() -> list[str]:
        async with publisher() as first:
            await first.publish_data(b"first", {"id": "a"})
            await first.publish_data(b"again", {"id": "a"})
            await first.publish_data(b"second", {"id": "b"})
        with pytest.raises(ValueError, match="oops"):
            async with redis_broker.break_topic(), publisher() as broken:
                await broken.publish_data(b"lost", {"id": "c"})
        async with publisher() as last:
            await last.publish_data(b"third", {"id": "c"})
        return [fields["data"] for _, fields in await get_async_redis_client().xrange(_stream_key("events"))]

    with temporary_settings(updates={PREFECT_MESSAGING_BROKER: OURS}):
        assert asyncio.run(run()) == ["first", "second", "third"]


def test_the_fleet_recipe_and_the_benchmarks_name_this_broker():
    assert f"export PREFECT_MESSAGING_BROKER={OURS}\n" in (REPO / "docs" / "fleet.md").read_text()
    assert bench_servers().Redis(port=6379, pid=0).messaging_env()["PREFECT_MESSAGING_BROKER"] == OURS
