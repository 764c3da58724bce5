# SPDX-License-Identifier: MIT
"""The CLI never prints a password: not from a malformed URL, not from a refused or failed
connection, not from $REDIS_URL, not in a log record."""

from __future__ import annotations

import logging

import pytest

from redislock.cli import main, mask_url
from redislock.server import RedisProcess

SECRET = "S3cretPw"

MALFORMED = [
    f"redis://user:{SECRET}@localhost:notaport/0",
    f"redis://:{SECRET}@localhost:99999/0",
    f"rediss://user:{SECRET}@[::1/0",
    f"redis://user:{SECRET[:3]}%40{SECRET[3:]}@localhost:x/0",
    f"unix:///tmp/x.sock?db=nan&password={SECRET}",
    f"http://user:{SECRET}@localhost:6379",
]


def _assert_silent(out: str, secret: str = SECRET) -> None:
    assert secret not in out
    assert secret.replace("%40", "@") not in out


@pytest.mark.parametrize("url", MALFORMED)
def test_malformed_url_exits_64_without_the_password(
    url: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert main(["--url", url, "inspect", "n"]) == 64
    out = capsys.readouterr()
    assert "bad Redis URL" in out.err
    _assert_silent(out.out + out.err + caplog.text)


@pytest.mark.parametrize("via_env", [False, True], ids=["flag", "env"])
def test_unreachable_server_exits_69_without_the_password(
    via_env: bool,
    tmp_path: object,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"redis://user:{SECRET}@127.0.0.1:1/0"  # nothing listens on port 1
    if via_env:
        monkeypatch.setenv("REDIS_URL", url)
        argv = ["inspect", "n"]
    else:
        argv = ["--url", url, "inspect", "n"]
    assert main(argv) == 69
    out = capsys.readouterr()
    source = "env REDIS_URL" if via_env else "flag --url"
    # The URL it tried (masked) and where that came from: what a cron run's mail must tell.
    assert f"cannot reach Redis at redis://user:***@127.0.0.1:1/0 (from {source}): " in out.err
    _assert_silent(out.out + out.err)


def test_wrong_password_is_not_echoed(
    redis_server: RedisProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = redis_server.client_kwargs()["unix_socket_path"]
    url = f"unix://nobody:{SECRET}@{sock}"
    status = main(["--url", url, "inspect", "n"])
    out = capsys.readouterr()
    assert status == 69
    assert f"Redis at unix://nobody:***@{sock} (from flag --url) refused the username or " in (
        out.err
    )
    assert "cannot reach" not in out.err
    _assert_silent(out.out + out.err)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("redis://u:pw@h:1/0", "redis://u:***@h:1/0"),
        ("redis://:pw@h", "redis://:***@h"),
        ("rediss://u:p%40w@h", "rediss://u:***@h"),
        ("unix:///s.sock?db=1&password=pw&x=1", "unix:///s.sock?db=1&password=***&x=1"),
        ("x redis://h:6379/0 y", "x redis://h:6379/0 y"),
    ],
)
def test_mask_url(text: str, masked: str) -> None:
    assert mask_url(text) == masked
