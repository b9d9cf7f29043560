"""What a package needs to add a sub-command to ``corrgrpo``: the entry-point group and the few helpers.

A package registers a :class:`Command` under the entry-point group ``corrgrpo.commands``, named after
the sub-command::

    [project.entry-points."corrgrpo.commands"]
    train = "corrgrpo_tasks.training.cli:COMMAND"

``corrgrpo`` imports a command's module only when that command runs (or for ``corrgrpo --help``), so
``corrgrpo explain`` never loads a task package, and a command whose package cannot be imported is a
one-line error saying how to install it. The command raises :class:`CliError` for a usage or input
problem (printed as one line, exit status 2).

Examples
--------
>>> import argparse, io
>>> def run(args, out):
...     out.write(f"hello {args.who}\\n")
...     return 0
>>> hello = Command("hello", "say hello", lambda p: p.add_argument("who"), run)
>>> parser = argparse.ArgumentParser(prog="corrgrpo")
>>> _ = hello.attach(parser.add_subparsers(dest="command"))
>>> out = io.StringIO()
>>> hello.run(parser.parse_args(["hello", "world"]), out), out.getvalue()
(0, 'hello world\\n')
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from importlib import metadata

__all__ = ["GROUP", "CliError", "Command", "names", "progress"]

GROUP = "corrgrpo.commands"

# Commands this distribution's own task package provides, and how to get them where they are missing.
INSTALL_HINTS = {
    "train": "pip install 'corrgrpo-core[trl,cli]' 'torch==2.13.0'",
    "evaluate": "pip install 'corrgrpo-core[tasks,cli]' 'torch==2.13.0'",
    "pipeline": "pip install 'corrgrpo-core[tasks,cli,trl]' 'torch==2.13.0' (verl: the verl extra)",
}


class CliError(Exception):
    """A usage or input problem: ``corrgrpo`` prints it as one line and exits with status 2."""


@dataclass(frozen=True)
class Command:
    """One ``corrgrpo`` sub-command: its name, a one-line help, its options and what it does.

    ``add_arguments(parser)`` declares the options on the sub-command's own parser; ``run(args, out)``
    does the work, writes its report to ``out`` and returns the exit status.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]
    description: str | None = None
    raw_description: bool = False

    def attach(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
        """Add this command to a sub-command parser and return its own parser."""
        parser = sub.add_parser(
            self.name,
            help=self.help,
            description=self.description or self.help,
            formatter_class=argparse.RawDescriptionHelpFormatter
            if self.raw_description
            else argparse.HelpFormatter,
        )
        self.add_arguments(parser)
        return parser


def entry_points() -> dict[str, metadata.EntryPoint]:
    """The installed commands by name (nothing is imported)."""
    from importlib import metadata  # (here: a core command's start does not read the package index)

    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def load(name: str, entry: metadata.EntryPoint | None) -> Command:
    """Import the command ``name``; a :class:`CliError` that says how to install it when that fails."""
    hint = INSTALL_HINTS.get(name, "install the package that provides it")
    if entry is None:
        raise CliError(f"the {name!r} command is not installed: {hint}")
    try:
        command = entry.load()
    except ImportError as err:
        raise CliError(f"the {name!r} command cannot be loaded ({err}): {hint}") from None
    if not isinstance(command, Command):
        raise CliError(
            f"the entry point {entry.value!r} of {name!r} is not a corrgrpo_core.cli.plugin.Command"
        )
    return command


def names(text: str) -> list[str]:
    """A comma-separated option value as a list of its non-empty, stripped parts."""
    return [part.strip() for part in text.split(",") if part.strip()]


@contextmanager
def progress(total: int, *, enabled: bool, label: str) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr with an ETA; yields ``tick(n=1, description=None)``.

    A no-op when disabled or when rich is not installed.
    """
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
    except ImportError:
        enabled = False
    if not enabled:
        yield lambda n=1, description=None: None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)

        def tick(n: int = 1, description: str | None = None) -> None:
            if description is not None:
                bar.update(task, description=description)
            bar.advance(task, n)

        yield tick
