# SPDX-License-Identifier: MIT
"""The public surface: exports, the sync/async twins, docstrings, typing marker, version."""

from __future__ import annotations

import dataclasses
import inspect
import os
import pickle
import subprocess
import sys
import types
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

import redislock
import redislock.errors
from redislock import AsyncLock, Lock, LockStatistics

SRC = Path(redislock.__file__).resolve().parent.parent


def public_names(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def exported_objects() -> dict[str, Any]:
    return {name: getattr(redislock, name) for name in redislock.__all__}


# ------------------------------------------------------------------ __all__


def test_all_is_sorted_and_unique() -> None:
    assert list(redislock.__all__) == sorted(redislock.__all__)
    assert len(set(redislock.__all__)) == len(redislock.__all__)


def test_all_names_resolve() -> None:
    for name in redislock.__all__:
        assert hasattr(redislock, name), name


def test_every_public_name_is_exported() -> None:
    """Anything public in the package namespace that is not a submodule is in ``__all__``."""
    public = {
        name
        for name in public_names(redislock)
        if not isinstance(getattr(redislock, name), types.ModuleType)
    }
    assert public <= set(redislock.__all__)
    assert "__version__" in redislock.__all__


def test_every_error_is_exported() -> None:
    assert set(redislock.errors.__all__) <= set(redislock.__all__)
    for name in redislock.errors.__all__:
        assert getattr(redislock, name) is getattr(redislock.errors, name)


def test_core_names_are_exported() -> None:
    assert {"Lock", "AsyncLock", "LockStatistics", "__version__"} <= set(redislock.__all__)


FUNCTIONS = {"ainspect", "inspect", "locked"}
"""The exported functions; every other export but ``__version__`` is a class."""


def test_exported_classes_claim_the_package_as_module() -> None:
    classes = {n: obj for n, obj in exported_objects().items() if isinstance(obj, type)}
    assert len(classes) == len(redislock.__all__) - 1 - len(FUNCTIONS)
    for name, cls in classes.items():
        assert cls.__module__ == "redislock", name
        assert cls.__qualname__ == name
        assert repr(cls) == f"<class 'redislock.{name}'>"


def test_exported_functions_claim_the_package_as_module() -> None:
    for name in FUNCTIONS:
        func = getattr(redislock, name)
        assert isinstance(func, types.FunctionType), name
        assert func.__module__ == "redislock", name
        assert func.__qualname__ == name


def test_version_is_a_pep440_like_string() -> None:
    assert isinstance(redislock.__version__, str)
    parts = redislock.__version__.split(".")
    assert len(parts) >= 3
    assert all(p.isdigit() for p in parts[:2])


def test_statistics_pickle_through_the_public_module() -> None:
    """``__module__ == "redislock"`` must still let pickle find the class."""
    stats = LockStatistics(
        name="job",
        held=True,
        lost=False,
        fencing_token=3,
        lease_remaining=1.5,
        acquisitions=1,
        failed_acquisitions=0,
        total_wait=0.25,
        renewals=2,
        renewal_failures=0,
    )
    copy = pickle.loads(pickle.dumps(stats))
    assert type(copy) is LockStatistics
    assert copy == stats
    assert b"credislock\nLockStatistics\n" in pickle.dumps(stats, protocol=0)


def test_statistics_fields_are_documented() -> None:
    doc = inspect.getdoc(LockStatistics)
    assert doc is not None
    for f in dataclasses.fields(LockStatistics):
        assert f"{f.name}:" in doc, f.name


# ------------------------------------------------------------------ Lock vs AsyncLock

CLASSES = [Lock, AsyncLock]


def members(cls: type) -> dict[str, Any]:
    """Public attributes as defined on the class (property objects, plain functions)."""
    return {n: inspect.getattr_static(cls, n) for n in public_names(cls)}


def test_same_public_names() -> None:
    assert public_names(Lock) == public_names(AsyncLock)
    expected_methods = {"acquire", "release", "extend", "locked", "owned", "remaining", "adopt"}
    assert expected_methods | {"detach", "statistics"} <= public_names(Lock)


def test_same_kinds_of_member() -> None:
    sync, aio = members(Lock), members(AsyncLock)
    for name in sync:
        assert type(sync[name]) is type(aio[name]), name


def test_same_constructor_signature() -> None:
    assert inspect.signature(Lock) == inspect.signature(AsyncLock)
    params = inspect.signature(Lock).parameters
    assert list(params)[:2] == ["client", "name"]
    assert all(p.kind is p.KEYWORD_ONLY for p in list(params.values())[2:])


@pytest.mark.parametrize("name", sorted(public_names(Lock)))
def test_same_signature(name: str) -> None:
    sync, aio = inspect.getattr_static(Lock, name), inspect.getattr_static(AsyncLock, name)
    if isinstance(sync, property):
        assert isinstance(aio, property)
        assert sync.fset is None
        assert aio.fset is None
        assert inspect.signature(sync.fget) == inspect.signature(aio.fget)  # type: ignore[arg-type]
    else:
        # The same, but for the flavour's own classes it returns (guard(): Guard/AsyncGuard).
        want = inspect.signature(aio)
        want = want.replace(return_annotation=str(want.return_annotation).removeprefix("Async"))
        assert inspect.signature(sync) == want


def io_methods() -> list[str]:
    """The methods that talk to Redis: exactly the coroutine functions of AsyncLock."""
    return sorted(n for n, m in members(AsyncLock).items() if inspect.iscoroutinefunction(m))


def test_async_is_exactly_the_io_methods() -> None:
    io = io_methods()
    assert io == ["acquire", "adopt", "extend", "locked", "owned", "release", "remaining"]
    for name, member in members(Lock).items():
        assert not inspect.iscoroutinefunction(member), name
    for name, member in members(AsyncLock).items():
        if name not in io and not isinstance(member, property):
            assert not inspect.iscoroutinefunction(member), name


def test_context_manager_protocols() -> None:
    assert hasattr(Lock, "__enter__")
    assert hasattr(Lock, "__exit__")
    assert not hasattr(Lock, "__aenter__")
    assert inspect.iscoroutinefunction(AsyncLock.__aenter__)
    assert inspect.iscoroutinefunction(AsyncLock.__aexit__)
    assert not hasattr(AsyncLock, "__enter__")  # `with AsyncLock` must fail loudly


async def test_locks_have_no_instance_dict() -> None:
    """``__slots__`` everywhere: a typo like ``lock.tll = 5`` raises instead of passing."""
    path = "/nonexistent/redislock-test/x.sock"  # never connected: construction is I/O-free
    sync_client = redis.Redis(unix_socket_path=path)
    async_client = redis.asyncio.Redis(unix_socket_path=path)
    for lock in (Lock(sync_client, "job"), AsyncLock(async_client, "job")):
        assert not hasattr(lock, "__dict__")
        with pytest.raises(AttributeError):
            setattr(lock, "tll", 5)  # noqa: B010 - a typo'd attribute, on purpose
    sync_client.close()
    await async_client.aclose()


# ------------------------------------------------------------------ docstrings


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_class_docstrings(cls: type) -> None:
    doc = inspect.getdoc(cls)
    assert doc is not None
    assert "Raises:" in doc
    assert "LockConfigError" in doc
    assert "Example::" in doc


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_public_member_has_a_docstring(cls: type) -> None:
    for name, member in members(cls).items():
        doc = member.__doc__
        assert doc is not None, f"{cls.__name__}.{name}"
        assert doc.strip(), f"{cls.__name__}.{name}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_io_method_docstrings_list_their_errors(cls: type) -> None:
    for name in io_methods():
        doc = inspect.getdoc(getattr(cls, name))
        assert doc is not None
        assert "\nRaises:\n" in doc, f"{cls.__name__}.{name}"
        raises = doc.split("\nRaises:\n", 1)[1]
        assert "redis.exceptions.RedisError" in raises, f"{cls.__name__}.{name}"


def test_every_error_has_a_docstring() -> None:
    for name in redislock.errors.__all__:
        assert inspect.getdoc(getattr(redislock.errors, name)), name


def test_module_docstrings() -> None:
    assert redislock.__doc__
    assert redislock.errors.__doc__


# ------------------------------------------------------------------ packaging


def test_ships_py_typed() -> None:
    marker = resources.files("redislock").joinpath("py.typed")
    assert marker.is_file()
    assert Path(str(marker)).parent == Path(redislock.__file__).parent


def test_python_m_redislock_version() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "redislock", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    python = ".".join(map(str, sys.version_info[:3]))
    line = f"redislock {redislock.__version__} (redis-py {redis.__version__}, Python {python})"
    assert proc.stdout == line + "\n"
    assert proc.stderr == ""


@pytest.mark.parametrize("cls", [redislock.Semaphore, redislock.AsyncSemaphore])
def test_a_semaphore_is_not_a_holder_its_permits_are(cls: type) -> None:
    """Holder members (token, fencing token, loss, hand-off) belong to each permit."""
    holder = ("fencing_token", "lost", "token", "detach")
    assert not [name for name in holder if hasattr(cls, name)]
    permit = redislock.Permit if cls is redislock.Semaphore else redislock.AsyncPermit
    assert all(hasattr(permit, name) for name in holder)


@pytest.mark.parametrize(
    ("cls", "args"),
    [
        (redislock.Lock, (None, "job", 5)),
        (redislock.AsyncLock, (None, "job", 5)),
        (redislock.FairLock, (None, "job", 5, 1)),
        (redislock.Semaphore, (None, "job", 3, 5)),
        (redislock.AsyncRedlock, ([None], "job", 5)),
        (redislock.Election, (None, "job", "me")),
    ],
)
def test_positional_options_are_refused_naming_the_public_class(
    cls: type, args: tuple[object, ...]
) -> None:
    """Python's own message, naming the class the user called (not an internal base);
    options are keyword-only. (A wrapper with a friendlier message cost ~0.5 us on every
    construction, which the uncontended benchmark pays per pair: not worth it.)"""
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\.__init__\(\) takes \d positional"):
        cls(*args)
