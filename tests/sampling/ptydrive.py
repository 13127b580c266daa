"""A minimal pexpect: run a command on a pseudo-terminal, wait for text, type keys."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]|\r")


class PtyDriver:
    """`cmd` with stdin, stdout and stderr on a new pseudo-terminal of rows x cols."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None,
                 rows: int = 60, cols: int = 120) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.tty_name = os.ttyname(slave)  # the device the command sees on stdin, e.g. /dev/pts/4
        self.proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                     start_new_session=True, close_fds=True)
        os.close(slave)
        self.master = master
        self.raw = ""
        self.pos = 0

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        self.raw += data.decode("utf-8", "replace")
        return True

    def expect(self, pattern: str, timeout: float = 60.0) -> str:
        """Wait until `pattern` (a regex) appears after the last match; return the text up to it."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.text, self.pos)
            if m:
                seen = self.text[self.pos:m.end()]
                self.pos = m.end()
                return seen
            if time.monotonic() > deadline:
                raise TimeoutError(f"{pattern!r} not seen; last output:\n{self.text[-2000:]}")
            if not self._read(0.2) and self.proc.poll() is not None:
                m = rx.search(self.text, self.pos)
                if m:
                    continue
                raise EOFError(f"process ended (rc {self.proc.returncode}) before {pattern!r}:\n{self.text[-2000:]}")

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\r").encode())

    def interrupt(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout: float = 60.0) -> int:
        """Read until the process ends (so it never blocks on a full terminal), then its exit code."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.interrupt()
                raise TimeoutError(f"process did not end; last output:\n{self.text[-2000:]}")
            self._read(0.1)
        while select.select([self.master], [], [], 0.05)[0] and self._read(0):
            pass
        os.close(self.master)
        return int(self.proc.returncode)
