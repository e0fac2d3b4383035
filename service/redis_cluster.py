"""The store's calls on a Redis Cluster: each to the primary of its keys' slot, through a plain
client of that node, so that a shard that stalls costs only the calls made to it.

redis-py's cluster client does not: when a call to one node times out it closes the
connections of every node, calls in flight to healthy shards included, and learns the map of
slots again before any further call, asking the nodes it knows in turn (the stalled one too).
Here the cluster client only holds the map: it is learned once, and learned again in the
background after a call meets a node that is gone or no longer the slot's primary, while the
other calls go on with the map they have. A slot that moves is followed (MOVED: to its new
primary, and the map learned again; ASK, while it migrates: to the node it goes to, the call
preceded by ASKING), at most MAX_REDIRECTS times a call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

MAX_REDIRECTS = 3  # and TRYAGAIN answers, each TRY_AGAIN_S later
TRY_AGAIN_S = 0.05
#: what says the map may be wrong: a node gone or stalled, a primary become a replica, a slot
#: not served where the map says
_MAP_WRONG = (
    RedisConnectionError, RedisTimeoutError, ReadOnlyError, ClusterDownError,
    RedisClusterException,
    TryAgainError,
)

Queue = Callable[[Any], Any]  # puts a call's commands in a pipeline


class ClusterRoutes:
    """The clients of a cluster's primaries, by the keys they serve. `roles` names the
    connection options of each kind of call (reads, writes, blocking waits): each role has its
    own client of each node."""

    def __init__(self, target: Any, roles: dict[str, dict[str, Any]]) -> None:
        self._target = target
        self._roles = roles
        # a RedisCluster for its map of slots alone (its nodes_manager: its own initialize
        # also asks one node for its COMMAND table, and fails every shard when that one
        # stalls); a map with a slot uncovered is still the map of the others
        self._map = target.connect(**roles["read"], require_full_coverage=False)
        self._clients: dict[tuple[str, str, int], Redis] = {}
        self._learning: asyncio.Task[None] | None = None  # the first map, shared
        self._learned = False
        self._relearning: asyncio.Task[None] | None = None
        self._closed = False

    async def client(self, key: str, role: str) -> Redis:
        """The client (of `role`) of the primary that serves `key` as far as the map knows."""
        if self._closed:
            raise RedisConnectionError("the store is closed")
        if not self._learned:  # one learning for the calls that wait for the first map
            if self._learning is None or self._learning.done():
                self._learning = asyncio.get_running_loop().create_task(self._first_map())
            await asyncio.shield(self._learning)
        try:
            node = self._map.get_node_from_key(key)
        except RedisClusterException:  # its slot not in the map (a failover under way)
            self.relearn()
            raise
        return self._client(node.host, node.port, role)

    async def _first_map(self) -> None:
        await self._map.nodes_manager.initialize()
        self._learned = True

    async def pipeline(self, key: str, role: str, queue: Queue) -> list[Any]:
        """The results of one pipeline on the primary of `key`, each a reply or the exception
        it met: what `queue` puts in it (commands on `key`'s slot), followed to where the slot
        went when the node answers that it moved (MOVED) or is moving (ASK), and sent again
        shortly when a migrating slot holds some of its keys here and some there (TRYAGAIN:
        a resharding moves a slot's keys within milliseconds)."""
        client, asking = await self.client(key, role), False
        for attempt in range(MAX_REDIRECTS + 1):
            pipe = client.pipeline(transaction=False)
            if asking:
                pipe.execute_command("ASKING")
            queue(pipe)
            try:
                results = await pipe.execute(raise_on_error=False)
            except _MAP_WRONG:
                self.relearn()
                raise
            if asking and isinstance(results[0], Exception):  # ASKING refused: its error for all
                return [results[0]] * (len(results) - 1)
            results = results[1:] if asking else results
            # every caller queues one command on the slot's keys (and at most a WAIT), which a
            # redirect or TRYAGAIN answers before running it: nothing of the pipeline ran there
            if any(isinstance(r, TryAgainError) for r in results):
                if attempt < MAX_REDIRECTS:
                    await asyncio.sleep(TRY_AGAIN_S)
                continue
            redirect = next((r for r in results if isinstance(r, AskError)), None)
            if redirect is None:
                if any(isinstance(r, _MAP_WRONG) for r in results):
                    self.relearn()
                return list(results)
            asking = not isinstance(redirect, MovedError)
            if not asking:
                self.relearn()
            client = self._client(redirect.host, redirect.port, role)
        return list(results)  # still redirected: the last answer, its errors for the caller

    async def call(self, key: str, role: str, queue: Queue) -> Any:
        """The reply of one call (`queue` puts it in a pipeline), or its error raised."""
        (result,) = await self.pipeline(key, role, queue)
        if isinstance(result, Exception):
            raise result
        return result

    def relearn(self) -> None:
        """Learn the map of slots again, in the background (once at a time); calls made
        meanwhile use the map they have."""
        if self._closed:
            return
        if self._relearning is None or self._relearning.done():
            self._relearning = asyncio.get_running_loop().create_task(self._learn())

    async def _learn(self) -> None:
        with contextlib.suppress(Exception):  # failing to is the next call's to meet
            await self._map.nodes_manager.initialize()

    def _client(self, host: str, port: int, role: str) -> Redis:
        """The client of `role` of a node (made at its first call; one a node the store has
        met, which a failover or a resharding adds to: a few a shard)."""
        if self._closed:
            raise RedisConnectionError("the store is closed")
        address = (role, host, port)
        if address not in self._clients:
            self._clients[address] = Redis(
                host=host, port=port, username=self._target.username,
                password=self._target.password, **self._target.tls_options,
                **self._roles[role],
            )
        return self._clients[address]

    async def close(self) -> None:
        """Close every client; calls still in flight fail (503s), and start nothing again."""
        self._closed = True
        for task in (self._learning, self._relearning):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        for client in self._clients.values():
            await client.aclose()
        manager = self._map.nodes_manager
        with contextlib.suppress(Exception):  # a map that could not be learned: nothing open
            await manager.aclose()
            await manager.aclose("startup_nodes")
