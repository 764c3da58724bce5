# SPDX-License-Identifier: MIT
"""The torture kit's oracle as a real process: its fencing rule, protocol, log and crashes."""

from __future__ import annotations

import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from redislock.testing.checkers import stale_writes
from redislock.testing.history import read_jsonl
from redislock.testing.oracle import Oracle, OracleClient, OracleError, OracleState

_dirs = itertools.count()


def fresh_dir(short_tmp: Path) -> Path:
    return short_tmp / f"or{os.getpid()}-{next(_dirs)}"


@pytest.fixture(scope="module")
def fenced(short_tmp: Path) -> Iterator[Oracle]:
    with Oracle(fresh_dir(short_tmp)) as oracle:
        yield oracle


@pytest.fixture(scope="module")
def unfenced(short_tmp: Path) -> Iterator[Oracle]:
    with Oracle(fresh_dir(short_tmp), fenced=False) as oracle:
        yield oracle


def raw(oracle: Oracle, *lines: bytes) -> list[dict[str, object]]:
    """Send raw request lines on one connection; the decoded replies."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(str(oracle.socket_path))
        sock.sendall(b"".join(lines))
        buf = b""
        while buf.count(b"\n") < len(lines):
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    return [json.loads(line) for line in buf.splitlines()]


def test_fenced_rule(fenced: Oracle) -> None:
    with fenced.client() as c:
        assert c.ping()["fenced"] is True
        assert c.write("rule", 5, "1.0", 1, "begin", "x")
        assert not c.write("rule", 4, "2.0", 2, "begin", "x")  # lower fence: stale
        assert not c.write("rule", 5, "3.0", 3, "begin", "x")  # same fence, other hold
        assert c.write("rule", 5, "1.0", 1, "end", "x")  # the same section's end
        assert c.write("rule", 3, "4.0", 4, "begin", "s")  # s / p: recorded only
        assert c.write("rule", 1, "4.1", 4, "begin", "p")
        assert c.write("rule", 6, "2.1", 2, "begin", "x")
        assert not c.write("rule", 5, "1.0", 1, "end", "x")  # superseded
        reply = c.call(
            {"res": "rule", "fence": 7, "hold": "3.1", "w": 3, "phase": "begin", "mode": "x"}
        )
    assert reply["ok"] is True
    assert reply["last"] == 6
    mine = [r for r in fenced.records() if r["res"] == "rule"]
    assert [(r["fence"], r["accepted"], r["last"]) for r in mine] == [
        (5, True, 0),
        (4, False, 5),
        (5, False, 5),
        (5, True, 5),
        (3, True, 5),
        (1, True, 5),
        (6, True, 5),
        (5, False, 6),
        (7, True, 6),
    ]
    assert mine[-1]["seq"] == reply["seq"]
    assert stale_writes(mine)[0] == []
    assert len(stale_writes(mine)[1]) == 3


def test_unfenced_accepts_everything(unfenced: Oracle) -> None:
    with unfenced.client() as c:
        assert c.ping()["fenced"] is False
        assert c.write("u", 5, "1.0", 1, "begin", "x")
        assert c.write("u", 6, "2.0", 2, "begin", "x")
        assert c.write("u", 5, "1.0", 1, "end", "x")  # stale, accepted all the same
        assert c.write("u", 6, "2.0", 2, "end", "x")
    mine = [r for r in unfenced.records() if r["res"] == "u"]
    assert all(r["accepted"] for r in mine)
    assert [r["last"] for r in mine] == [0, 5, 6, 6]  # still the largest accepted x fence
    accepted, _ = stale_writes(mine)
    assert [(r["hold"], r["phase"]) for r in accepted] == [("1.0", "end")]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"not json\n", "bad JSON"),
        (b"[1, 2]\n", "object"),
        (b'{"res": "r"}\n', "missing"),
        (b'{"res": "r", "fence": 1, "hold": "1.0", "w": 1, "phase": "begin"}\n', "mode"),
        (b'{"res": "r", "fence": "1", "hold": "1.0", "w": 1, "phase": "begin", "mode": "x"}\n',
         "fence"),
        (b'{"res": "r", "fence": true, "hold": "1.0", "w": 1, "phase": "begin", "mode": "x"}\n',
         "fence"),
        (b'{"res": "r", "fence": -1, "hold": "1.0", "w": 1, "phase": "begin", "mode": "x"}\n',
         "fence"),
        (b'{"res": "", "fence": 1, "hold": "1.0", "w": 1, "phase": "begin", "mode": "x"}\n',
         "res"),
        (b'{"res": "r", "fence": 1, "hold": "1.0", "w": 1, "phase": "mid", "mode": "x"}\n',
         "phase"),
        (b'{"res": "r", "fence": 1, "hold": "1.0", "w": 1, "phase": "end", "mode": "z"}\n',
         "mode"),
        (b'{"res": "r", "fence": 1, "hold": "1.0", "w": 1, "phase": "end", "mode": "x", '
         b'"extra": 1}\n', "unknown field"),
    ],
)  # fmt: skip
def test_bad_request_gets_an_error_and_the_server_survives(
    fenced: Oracle, line: bytes, message: str
) -> None:
    before = len(fenced.records())
    ping = b'{"ping": true}\n'
    replies = raw(fenced, line, ping)  # the same connection keeps working
    assert message in str(replies[0]["error"])
    assert replies[1]["pong"] is True
    assert len(fenced.records()) == before  # invalid requests are not records
    request = {"res": 1} if message == "bad JSON" else json.loads(line)
    with fenced.client() as c, pytest.raises(OracleError, match="oracle refused the request"):
        c.call(request)


def test_over_long_line_is_refused(fenced: Oracle) -> None:
    replies = raw(fenced, b'{"res": "' + b"r" * 70_000 + b'"}\n')
    assert "over" in str(replies[0]["error"])
    with fenced.client() as c:
        assert c.ping()["pong"] is True


def test_concurrent_clients_from_threads(fenced: Oracle) -> None:
    threads, per_thread = 6, 40
    counter = itertools.count(1)
    lock = threading.Lock()
    errors: list[BaseException] = []
    start = time.monotonic()

    def worker(w: int) -> None:
        try:
            with fenced.client() as c:
                for n in range(per_thread):
                    with lock:
                        fence = next(counter)
                    hold = f"{w}.{n}"
                    c.write("conc", fence, hold, w, "begin", "x")
                    c.write("conc", fence, hold, w, "end", "x")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(10)
    assert errors == []
    records = fenced.records()
    mine = [r for r in records if r["res"] == "conc"]
    assert len(mine) == threads * per_thread * 2
    # one order for everything: seq contiguous over the whole log, times never go back
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(records))
    assert all(start <= r["t"] <= time.monotonic() for r in mine)
    # the server's decisions are the rule's, replayed independently; none stale accepted
    model = OracleState(fenced=True)
    for r in mine:
        assert model.write(r, r["t"])["accepted"] == r["accepted"]
    assert stale_writes(mine)[0] == []


def test_records_carry_monotonic_receipt_times(fenced: Oracle) -> None:
    with fenced.client() as c:
        stamps = []
        for fence in (1, 2, 3):
            before = time.monotonic()
            c.write("times", fence, f"1.{fence}", 1, "begin", "x")
            stamps.append((before, time.monotonic()))
    mine = [r for r in fenced.records() if r["res"] == "times"]
    assert len(mine) == 3
    for rec, (before, after) in zip(mine, stamps, strict=True):
        assert before <= rec["t"] <= after


def test_kill_9_leaves_a_readable_log_and_a_restart_remembers(short_tmp: Path) -> None:
    oracle = Oracle(fresh_dir(short_tmp)).start()
    try:
        with oracle.client() as c:
            for fence in range(1, 21):
                assert c.write("k", fence, f"1.{fence}", 1, "begin", "x")
            oracle.kill()
            assert not oracle.running
            records = read_jsonl(oracle.log_path)
            assert [r["fence"] for r in records] == list(range(1, 21))
            with pytest.raises(OracleError, match="cannot reach"):
                c.write("k", 21, "1.21", 1, "begin", "x")
            oracle.start()  # the client reconnects by itself
            assert not c.write("k", 19, "2.0", 2, "begin", "x")  # the fences survived
            assert c.write("k", 20, "1.20", 1, "end", "x")
        records = oracle.records()
        assert [r["seq"] for r in records] == list(range(22))
        assert records[-2]["last"] == 20
    finally:
        assert oracle.stop() == 0  # SIGTERM: a clean exit
    assert not oracle.socket_path.exists()


def test_start_failures(short_tmp: Path, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    with pytest.raises(OracleError, match="over 107 bytes"):
        Oracle(deep).start()
    oracle = Oracle(fresh_dir(short_tmp))
    assert oracle.stop() is None  # never started: nothing to do
    assert oracle.records() == []


def test_client_timeout_and_refused(short_tmp: Path) -> None:
    path = fresh_dir(short_tmp)
    path.mkdir(parents=True)
    sock_path = path / "mute.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mute:
        mute.bind(str(sock_path))
        mute.listen(1)  # never accepts, never answers
        client = OracleClient(sock_path, timeout=0.2)
        with pytest.raises(OracleError, match="did not answer"):
            client.ping()
        client.close()
    with pytest.raises(OracleError, match="cannot reach"):
        OracleClient(path / "nobody.sock", timeout=0.2).ping()
    with pytest.raises(ValueError, match="timeout"):
        OracleClient(sock_path, timeout=0)
