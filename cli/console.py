"""The rich Console the commands print tables with: rich's own, but a reader that goes away (`| head`) ends the
command as it ends every other command (cli/errors.py: exit 141, quietly). rich's Console exits 1 on a broken pipe
(a SystemExit, which passes cli/errors.py's handled() by), so `evaluate | head -c 1` ended with 1 and no word said.
Imports rich, which costs a command's start some 50 ms: only the commands that print tables import this."""

from __future__ import annotations

import errno

from rich import console


class Console(console.Console):
    """rich.console.Console whose broken pipe is a BrokenPipeError, for handled() to end the command with 141."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # NOTE: as rich does: nothing more is written (and refused again) by this console
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")
