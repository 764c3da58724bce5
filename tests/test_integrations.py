# SPDX-License-Identifier: MIT
"""The framework integrations and their examples (examples/), against the real framework
packages (test dependencies) and a real redis-server, with redis-py default clients."""

# (no `from __future__ import annotations`: FastAPI reads the endpoints' annotations,
# which name local dependencies)

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated

import httpx
import pytest
import redis
import redis.asyncio
from fastapi import Depends, FastAPI

from redislock import AsyncLock, Lock, LockConfigError
from redislock._core.keys import LockKeys
from redislock.integrations.apscheduler import one_instance, run_key
from redislock.integrations.celery import lock_name as celery_lock_name
from redislock.integrations.fastapi import LockDependency
from redislock.server import RedisProcess

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def url_of(server: RedisProcess) -> str:
    assert server.socket_path is not None
    return f"unix://{server.socket_path}"


def run_example(name: str, server: RedisProcess, timeout: float = 60) -> str:
    """Run examples/<name>.py as a script against ``server``; its stdout (exit 0 checked)."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), url_of(server)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# ------------------------------------------------------------------ FastAPI


async def test_fastapi_example_ships_one_request_per_order(redis_server: RedisProcess) -> None:
    assert await example("fastapi_orders").main(url_of(redis_server)) == 0


def test_fastapi_example_runs_as_a_script(redis_server: RedisProcess) -> None:
    out = run_example("fastapi_orders", redis_server)
    assert "OK: one ship per order at a time" in out


async def test_fastapi_dependency_holds_the_lock_for_the_request(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    app = FastAPI()
    seen: list[bool] = []
    dep = LockDependency(ar, "user:{user_id}:{kind}", timeout=5)

    @app.put("/users/{user_id}")
    async def update(
        user_id: int, kind: str, lock: Annotated[AsyncLock, Depends(dep)]
    ) -> dict[str, int]:
        seen.append(bool(admin.exists(LockKeys.for_name(f"user:{user_id}:{kind}").lock)))
        assert lock.fencing_token is not None
        return {"fence": lock.fencing_token}

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        first = await http.put("/users/3", params={"kind": "email"})
        second = await http.put("/users/3", params={"kind": "email"})
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json()["fence"] > first.json()["fence"]
    assert seen == [True, True]
    assert not admin.exists(LockKeys.for_name("user:3:email").lock)  # released after


async def test_fastapi_busy_answer_has_retry_after(ar: redis.asyncio.Redis) -> None:
    app = FastAPI()
    dep = LockDependency(ar, "job", status_code=423, retry_after=2.5)

    @app.post("/job")
    async def job(lock: Annotated[AsyncLock, Depends(dep)]) -> dict[str, bool]:
        return {"ran": True}

    holder = AsyncLock(ar, "job")
    async with (
        holder,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        busy = await http.post("/job")
    assert busy.status_code == 423
    assert busy.headers["retry-after"] == "2.5"
    assert "busy" in busy.json()["detail"]


@pytest.mark.parametrize(
    ("name", "options", "match"),
    [
        ("order:{0}", {}, "parameter names"),
        ("order:{", {}, "format string"),
        ("x", {"status_code": 99}, "HTTP status"),
        ("x", {"ttl": 0}, "ttl"),
        (7, {}, "str"),
    ],
)
def test_fastapi_bad_configuration_fails_at_construction(
    ar: redis.asyncio.Redis, name: object, options: dict[str, object], match: str
) -> None:
    with pytest.raises(LockConfigError, match=match):
        LockDependency(ar, name, **options)  # type: ignore[arg-type]


def test_fastapi_dependency_needs_an_asyncio_client(r: redis.Redis) -> None:
    with pytest.raises(LockConfigError):
        LockDependency(r, "x")


# ------------------------------------------------------------------ APScheduler


def test_apscheduler_example_runs_each_scheduled_run_on_one_instance(
    redis_server: RedisProcess,
) -> None:
    out = run_example("apscheduler_report", redis_server)
    assert "OK: every scheduled run ran on one instance" in out
    assert out.count(" ran on host-") >= 3


def test_one_instance_skips_a_run_another_instance_did(r: redis.Redis) -> None:
    ran: list[str] = []

    @one_instance(r, "nightly", every=3600)
    def nightly(who: str) -> str:
        ran.append(who)
        return who

    assert nightly("a") == "a"
    assert nightly("b") is None  # the same run (same nearest hour): recorded by "a"
    assert ran == ["a"]


def test_one_instance_skips_while_another_runs_it(r: redis.Redis) -> None:
    with Lock(r, "busy-job"):  # the job's lock, held by "another instance"
        assert one_instance(r, "busy-job", every=60)(lambda: "ran")() is None


def test_one_instance_keys_runs_by_the_nearest_multiple() -> None:
    assert run_key(60, 1_700_000_040.0) == run_key(60, 1_700_000_069.9)  # 12:34:00 +- 29.9 s
    assert run_key(60, 1_700_000_010.0) != run_key(60, 1_700_000_070.0)
    assert run_key(3600, 1_763_856_000.0 - 0.4).endswith("T00:00:00Z")  # just before midnight


def test_one_instance_bad_configuration(r: redis.Redis) -> None:
    with pytest.raises(LockConfigError, match="every"):
        one_instance(r, "x", every=0)
    with pytest.raises(LockConfigError):
        one_instance(r, "", every=1)


# ------------------------------------------------------------------ Django (django-redis)


def test_django_example_cache_lock_is_redislocks(redis_server: RedisProcess) -> None:
    """In a subprocess: Django's settings are configured once per process."""
    out = run_example("django_cache_lock", redis_server)
    assert "OK: cache.lock() is redislock's, fenced, and excludes redis-py's" in out
    assert "RedisPyLock held, fencing token" in out


# ------------------------------------------------------------------ Celery


def test_celery_example_runs_no_two_runs_with_the_same_arguments_at_once(
    redis_server: RedisProcess,
) -> None:
    """A real worker (4 threads) with the test server as broker and result backend."""
    out = run_example("celery_singleton", redis_server, timeout=90)
    assert "OK: no two runs for one shop at once" in out
    assert "'rebuilt 2'" in out


def test_celery_lock_name_is_stable_and_argument_specific() -> None:
    a = celery_lock_name("shop.rebuild", (1,), {"full": True})
    assert a == celery_lock_name("shop.rebuild", (1,), {"full": True})
    assert a != celery_lock_name("shop.rebuild", (2,), {"full": True})
    assert a.startswith("celery:shop.rebuild:")
    with pytest.raises(LockConfigError):
        celery_lock_name("", (), {})
