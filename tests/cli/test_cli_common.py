"""run_app: whatever escapes a command becomes one stderr line and a documented code."""

from __future__ import annotations

import typer

from clusterdoctor.cli.common import ERROR_EXIT_CODES, EXIT_INTERNAL, run_app
from clusterdoctor.errors import InputError


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.command("bug")
    def bug() -> None:
        raise KeyError("oops")

    @app.command("missing")
    def missing(path: str) -> None:
        open(path)

    @app.command("bad")
    def bad() -> None:
        raise InputError("not a topology", "x.xml", 3)

    @app.command("ok")
    def ok() -> None:
        raise typer.Exit(1)

    return app


def test_internal_error_is_one_line_70_and_a_traceback_only_on_request(capfd, monkeypatch, tmp_path):
    app = _app()
    assert run_app(app, ["bug"]) == EXIT_INTERNAL
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "KeyError" in err and "Traceback" not in err
    monkeypatch.setenv("CLUSTERDOCTOR_DEBUG", "1")
    assert run_app(app, ["bug"]) == EXIT_INTERNAL
    assert "Traceback" in capfd.readouterr().err


def test_os_and_input_errors_use_the_commands_code(capfd, tmp_path, monkeypatch):
    app = _app()
    missing = str(tmp_path / "nope")
    assert run_app(app, ["missing", missing]) == 2
    assert capfd.readouterr().err == f"clusterdoctor: error: {missing}: No such file or directory\n"
    assert run_app(app, ["bad"]) == 2
    assert capfd.readouterr().err == "clusterdoctor: error: x.xml:3: not a topology\n"
    monkeypatch.setitem(ERROR_EXIT_CODES, "bad", 4)  # a command with its own documented code
    assert run_app(app, ["bad"]) == 4
    assert run_app(app, ["bad", "--what"]) == 4
    assert "no such option: --what" in capfd.readouterr().err.lower()
    assert run_app(app, ["ok"]) == 1  # a command's own exit code passes through
