# SPDX-License-Identifier: MIT
"""``@locked``: a function (sync or ``async def``) that runs while holding a lock named from
its arguments. Real redis-server, redis-py default clients."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import redis.asyncio
from mypy import api

import redislock
from redislock import locked
from redislock._core.keys import LockKeys


def test_calls_with_one_name_exclude_each_other_and_other_names_do_not(r: redis.Redis) -> None:
    inside: dict[int, int] = {}
    most: dict[int, int] = {}
    guard = threading.Lock()

    @locked(r, "order:{order_id}", timeout=20)
    def ship(order_id: int, pause: float = 0.05) -> int:
        with guard:
            inside[order_id] = inside.get(order_id, 0) + 1
            most[order_id] = max(most.get(order_id, 0), inside[order_id])
        time.sleep(pause)
        with guard:
            inside[order_id] -= 1
        return order_id * 10

    results: list[int] = []
    threads = [threading.Thread(target=lambda i=i: results.append(ship(i % 2))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [0, 0, 0, 0, 10, 10, 10, 10]
    assert most == {0: 1, 1: 1}  # never two calls for one order at once
    assert not r.exists(LockKeys.for_name("order:0").lock)  # released after each call


def test_the_lock_is_held_during_the_call_and_released_after_an_exception(
    r: redis.Redis,
) -> None:
    key = LockKeys.for_name("job:nightly").lock

    @locked(r, "job:{name}")
    def job(name: str) -> None:
        assert r.exists(key)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        job("nightly")
    assert not r.exists(key)
    assert job.__name__ == "job"  # functools.wraps


def test_a_busy_name_raises_acquire_timeout(r: redis.Redis) -> None:
    @locked(r, "busy:{n}", timeout=0.2)
    def work(n: int) -> None:
        pass

    with redislock.Lock(r, "busy:1"):
        with pytest.raises(redislock.AcquireTimeoutError):
            work(1)
        work(2)  # another name is free


def test_attribute_and_keyword_fields(r: redis.Redis) -> None:
    @dataclass
    class User:
        id: int

    seen: list[bool] = []

    @locked(r, "user:{user.id}:{kind}", fair=True)
    def touch(user: User, *, kind: str = "profile") -> None:
        seen.append(bool(r.exists(LockKeys.for_name(f"user:{user.id}:{kind}").lock)))

    touch(User(7))
    touch(User(8), kind="avatar")
    assert seen == [True, True]


async def test_a_coroutine_function_uses_an_asyncio_lock(ar: redis.asyncio.Redis) -> None:
    inside = 0
    most = 0

    @locked(ar, "report:{day}")
    async def build(day: str) -> str:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.02)
        inside -= 1
        return day

    assert asyncio.iscoroutinefunction(build)
    assert await asyncio.gather(*(build("mon") for _ in range(5))) == ["mon"] * 5
    assert most == 1


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ("order:{missing}", "has no parameter"),
        ("order:{0}", "not positions"),
        ("order:{", "not a format string"),
        ("", "name"),
    ],
)
def test_a_bad_template_fails_at_decoration(r: redis.Redis, template: str, match: str) -> None:
    with pytest.raises(redislock.LockConfigError, match=match):

        @locked(r, template)
        def f(order_id: int) -> None:
            pass


def test_a_bad_option_or_client_fails_at_decoration(
    r: redis.Redis, ar: redis.asyncio.Redis
) -> None:
    with pytest.raises(redislock.LockConfigError):

        @locked(r, "x:{a}", ttl=-1)
        def f(a: int) -> None:
            pass

    with pytest.raises(redislock.LockConfigError, match="asyncio"):

        @locked(r, "x:{a}")  # a sync client for a coroutine function
        async def g(a: int) -> None:
            pass

    with pytest.raises(redislock.LockConfigError):

        @locked(ar, "x:{a}")  # an asyncio client for a plain function
        def h(a: int) -> None:
            pass


@pytest.mark.slow
def test_the_decorated_function_keeps_its_type(tmp_path: Path) -> None:
    code = (
        "import redis\n"
        "from redislock import locked\n"
        "r = redis.Redis()\n"
        "@locked(r, 'order:{order_id}')\n"
        "def ship(order_id: int) -> str:\n"
        "    return ''\n"
        "x: str = ship(1)\n"
        "ship('one')  # line 8: a str is not an int\n"
    )
    path = tmp_path / "user_code.py"
    path.write_text(code)
    out, err, status = api.run([str(path), "--strict", "--no-error-summary"])
    lines = [line for line in (out + err).splitlines() if "error:" in line]
    assert status == 1, out + err
    assert [line.split(":")[1] for line in lines] == ["8"], out + err
