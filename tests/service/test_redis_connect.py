"""SMCT_REDIS_URL's three forms (service/redis_connect.py)."""

from __future__ import annotations

import pytest

from service.redis_connect import Target


def test_one_server_cluster_and_sentinel_urls() -> None:
    assert Target.parse("redis://h:6379/2") == Target("single", "redis://h:6379/2")
    cluster = Target.parse("redis+cluster://:pw@a:7000,b:7001")
    assert (cluster.kind, cluster.password) == ("cluster", "pw")
    assert cluster.nodes == (("a", 7000), ("b", 7001))
    sentinel = Target.parse("redis+sentinel://u:p%40ss@s1:26379,s2:26379,[::1]:26380/main/3")
    assert sentinel.kind == "sentinel" and sentinel.service == "main" and sentinel.db == 3
    assert sentinel.nodes == (("s1", 26379), ("s2", 26379), ("::1", 26380))
    assert (sentinel.username, sentinel.password) == ("u", "p@ss")


@pytest.mark.parametrize(("url", "message"), [
    ("redis+cluster:///", "names no host:port"),
    ("redis+sentinel://s1:26379", "names no service"),
    ("redis+sentinel://s1:26379/main/x", "database must be a number"),
    ("redis+cluster://:secret@a", "'a' is not host:port"),
])
def test_a_wrong_url_says_what_to_fix_without_its_password(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        Target.parse(url)
    assert "secret" not in str(err.value)


def test_the_service_refuses_a_wrong_url_at_start() -> None:
    from pydantic import ValidationError

    from service.settings import Settings

    with pytest.raises(ValidationError, match="names no service"):
        Settings(redis_url="redis+sentinel://s1:26379")
