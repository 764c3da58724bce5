# SPDX-License-Identifier: MIT
"""The command line's parsing, in-process and without a server (every case here ends
before any I/O): where CMD starts, which usage line an unknown option gets, and that the
parsers record every option they show (which the cut of CMD relies on)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from redislock.cli import EXIT_USAGE, build_parsers, main, split_command


@pytest.fixture(autouse=True)
def _no_config_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("REDISLOCK_SYSTEM_CONFIG", str(tmp_path / "none.toml"))
    for name in ("REDIS_URL", "REDISLOCK_PREFIX", "REDISLOCK_REQUIRE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("words", "own", "cmd"),
    [
        ("run job ./a.sh -x", "run job", "./a.sh -x"),
        ("run job -n ./a.sh -n", "run job -n", "./a.sh -n"),
        ("run -w 5 job ./a.sh", "run -w 5 job", "./a.sh"),  # -w takes the next word
        ("run -w5 job ./a.sh", "run -w5 job", "./a.sh"),
        ("run -nw 5 job ./a.sh", "run -nw 5 job", "./a.sh"),  # a cluster ending in -w
        ("run -wn job ./a.sh", "run -wn job", "./a.sh"),  # -w's value attached: n
        ("run --wait=5 job ./a.sh", "run --wait=5 job", "./a.sh"),
        ("run --ttl 60 -q job ./a.sh", "run --ttl 60 -q job", "./a.sh"),
        ("--url u -q run job ./a.sh --url x", "--url u -q run job", "./a.sh --url x"),
        ("run job -- ./a.sh -x", "run job", "./a.sh -x"),
        ("run -- job ./a.sh", "run", "job ./a.sh"),
        ("run -c 'echo hi' job", "run -c 'echo hi' job", ""),  # -c takes a value
        ("once job --period 60 ./a.sh", "once job --period 60", "./a.sh"),
        ("elect --identity me job ./a.sh", "elect --identity me job", "./a.sh"),
        ("run job -s ./a.sh", "run job -s", "./a.sh"),  # unknown: ours, left to argparse
        ("list --json", "list --json", ""),
        ("list -- x", "list", "x"),  # not a subcommand with CMD: after -- is left over
        ("inspect job extra", "inspect job extra", ""),
    ],
)
def test_cmd_starts_at_the_first_word_after_name_that_is_not_an_option(
    words: str, own: str, cmd: str
) -> None:
    import shlex

    assert split_command(build_parsers(), shlex.split(words)) == (
        shlex.split(own),
        shlex.split(cmd),
    )


@pytest.mark.parametrize(
    ("argv", "usage", "unknown"),
    [
        (["run", "-s", "NAME", "true"], "redislock run [options] NAME", "-s"),  # issue 30
        (
            ["run", "job", "--no-such-flag", "true"],
            "redislock run [options] NAME",
            "--no-such-flag",
        ),
        (["once", "job", "--period", "5", "--no-wait", "true"], "redislock once ", "--no-wait"),
        (["elect", "--bogus", "job", "true"], "redislock elect ", "--bogus"),
        (["inspect", "a", "b"], "redislock inspect ", "b"),
        (["list", "--bogus"], "redislock list ", "--bogus"),
        (["top", "--once", "--bogus"], "redislock top ", "--bogus"),
        (["server", "status", "--bogus"], "redislock server ", "--bogus"),
    ],
)
def test_an_unknown_argument_of_a_subcommand_gets_its_own_usage(
    argv: list[str], usage: str, unknown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {usage}"), err
    command = usage.split()[1]
    assert f"redislock {command}: error: unrecognized arguments: {unknown}\n" in err, err


def test_an_unknown_option_before_the_subcommand_gets_the_top_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["-s", "run", "job", "true"])
    assert caught.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: redislock [-h]"), err
    assert "redislock: error: unrecognized arguments: -s\n" in err, err


_OPTION_LINE = re.compile(r"^  (-.*?)(?:  |$)")  # "  -w S, --wait S    wait at most ..."


def test_every_option_a_parser_shows_is_recorded() -> None:
    """split_command knows an option only from Parser.options: an option added past the
    record (a plain argparse group, say) would be missing, and its value taken for NAME."""
    subs = build_parsers()
    parsers = {"": subs.top} | {name: c.parser for name, c in subs.commands.items()}
    for name, parser in parsers.items():
        shown = set()
        for line in parser.format_help().splitlines():
            found = _OPTION_LINE.match(line)
            if found:
                shown |= set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", found[1]))
        assert {"-h", "--help", "--url", "--prefix", "-q", "--quiet"} <= shown, name
        assert shown == set(parser.options), name
    run = subs.commands["run"].parser
    assert [run.options[o].nargs == 0 for o in ("-w", "--ttl", "-c", "-n", "-q", "--read")] == [
        False,
        False,
        False,
        True,
        True,
        True,
    ]
