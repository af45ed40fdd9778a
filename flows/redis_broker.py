"""Prefect's Redis broker (`prefect_redis.messaging`) with its per-event round trips batched: the
`PREFECT_MESSAGING_BROKER` a multi-server setup names (docs/fleet.md, "The broker's round trips").

prefect-redis 0.3 makes two round trips to Redis for every event an API process receives: its
publisher awaits one XADD per event even when it flushes a batch of them, and the API's event
distributor (what `/events/out` and the workers' cancellation observers read) reads the stream back
with XREAD COUNT 1, as `ephemeral_subscription` gives its consumer no batch size. A one-process
server passes the same events in memory, which is why the scaled-out setup cost a few ms a point more.
Here the publisher sends each batch in one pipeline (the same XADDs in the same order, not as a
transaction) and the ephemeral consumers read up to `EPHEMERAL_READ_BATCH` events a round trip (as
many as are there; a blocking read still returns as soon as one arrives). Everything else is
prefect-redis's own, so its settings, consumer groups, trimming and dead-letter queue apply. The
publisher overrides a private method, hence the server-redis extra's prefect-redis below 0.4 (and
`tests/test_redis_broker.py` beside prefect-redis's broker). Both changes are reported upstream in
docs/fleet.md; when prefect-redis batches them itself, name `prefect_redis.messaging` again and
delete this module.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from prefect_redis.messaging import Cache, Consumer
from prefect_redis.messaging import Publisher as _Publisher
from prefect_redis.messaging import ephemeral_subscription as _ephemeral_subscription

__all__ = ["Cache", "Consumer", "Publisher", "break_topic", "ephemeral_subscription"]

EPHEMERAL_READ_BATCH = 100  # the services' own consumers read 100 at a time too (flows/server.py)


class Publisher(_Publisher):
    async def _publish_current_batch(self) -> None:
        if not self._batch:
            return
        if self.deduplicate_by:
            to_publish = await self.cache.without_duplicates(self.deduplicate_by, self._batch)
        else:
            to_publish = list(self._batch)
        self._batch.clear()
        try:
            async with self._client.pipeline(transaction=False) as pipeline:
                for message in to_publish:
                    pipeline.xadd(self.stream, {"data": message.data, "attributes": orjson.dumps(message.attributes)})
                await pipeline.execute()
        except Exception:
            if self.deduplicate_by:  # as prefect-redis: a message that was not sent may be sent again
                await self.cache.forget_duplicates(self.deduplicate_by, to_publish)
            raise


@asynccontextmanager
async def ephemeral_subscription(
    topic: str, source: str | None = None, group: str | None = None
) -> AsyncGenerator[dict[str, Any], None]:
    async with _ephemeral_subscription(topic, source, group) as consumer_kwargs:
        yield {**consumer_kwargs, "read_batch_size": EPHEMERAL_READ_BATCH}


@asynccontextmanager
async def break_topic() -> AsyncGenerator[None, None]:
    """Prefect's tests' broken broker: publishing raises ValueError("oops") (prefect-redis's own breaks
    the single XADD, which a pipeline does not await)."""
    from unittest import mock

    with mock.patch("redis.asyncio.client.Pipeline.execute", mock.AsyncMock(side_effect=ValueError("oops"))):
        yield
