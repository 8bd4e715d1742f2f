"""A real terminal for end-to-end tests: tmux on a private socket, send-keys to type, capture-pane to read.

tmux is required: ``.ci/run`` installs it and fails when it cannot, so these tests never skip.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import time
import uuid
from pathlib import Path


class Tmux:
    """One tmux server on a private socket, one session."""

    def __init__(self, width: int, height: int, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.socket = f"backfill-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # Start a plain shell, make sure the window has its final size, and only then type the command:
        # a program started with the session can see the default 80×24 before tmux applies -x/-y.
        self._tmux("new-session", "-d", "-s", "main", "-x", str(width), "-y", str(height), "sh")
        self._tmux("resize-window", "-t", "main", "-x", str(width), "-y", str(height))
        deadline = time.monotonic() + 10
        while self._tmux("display", "-p", "-t", "main", "#{pane_width}x#{pane_height}").strip() != f"{width}x{height}":
            if time.monotonic() > deadline:
                raise AssertionError("tmux did not take the requested size")
            time.sleep(0.05)
        # COLUMNS and LINES (set under pytest) would override the real size for Textual: drop them.
        line = f'clear; cd {shlex.quote(str(cwd))} && env -u COLUMNS -u LINES {exports} {command}; echo EXIT""=$?'
        self._tmux("send-keys", "-t", "main", "-l", line)
        self._tmux("send-keys", "-t", "main", "Enter")

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "main", key)
            time.sleep(0.15)

    def screen(self, *, escapes: bool = False) -> str:
        """The visible pane as text; with ``escapes``, with the SGR colour and style sequences tmux keeps."""
        return self._tmux("capture-pane", "-p", "-J", *(["-e"] if escapes else []), "-t", "main")

    def title(self) -> str:
        """The pane's title, as the program in it last set it (OSC 0 or 2)."""
        return self._tmux("display", "-p", "-t", "main", "#{pane_title}").strip()

    def escape(self, closing: str, timeout: float = 30.0) -> None:
        """Esc, then wait until ``closing`` (a text of what it closes) is off the screen: a key sent before the app
        read the Esc could reach it in the same read, and ``Esc q`` is then Alt+q (a busy machine's flake)."""
        self.keys("Escape")
        self.wait_gone(closing, timeout)

    def wait_gone(self, text: str, timeout: float = 30.0) -> None:
        """Wait until ``text`` has left the screen."""
        deadline = time.monotonic() + timeout
        while text in self.screen():
            assert time.monotonic() < deadline, f"{text!r} never left the screen:\n{self.screen()}"
            time.sleep(0.1)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.screen()}")

    def kill_server(self) -> None:
        """The terminal disappears, as when a window is closed or an SSH connection drops: tmux closes the pane's
        pseudo-terminal and the kernel hangs up its foreground process group."""
        self._tmux("kill-server")

    def close(self) -> None:
        """Kill what the pane still runs (a test that failed may have left anything behind), then the server."""
        import psutil

        try:
            pane = int(self._tmux("display", "-p", "-t", "main", "#{pane_pid}").strip())
            leftovers = psutil.Process(pane).children(recursive=True)
        except (subprocess.CalledProcessError, ValueError, psutil.Error):
            leftovers = []
        for process in leftovers:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(leftovers, timeout=10)
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
