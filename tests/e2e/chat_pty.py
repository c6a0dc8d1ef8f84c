#!/usr/bin/env python3
"""ml_run as a person uses it in a terminal: each case runs ml_run on a pseudo-terminal (its
controlling terminal, so Ctrl-C is the byte 0x03 turned into SIGINT by the line discipline,
exactly as in a shell) and reads the screen.

Usage: chat_pty.py --bin BUILD_DIR --work E2E_DIR [CASE ...]
Cases: interrupt_reply, interrupt_oneshot, full_context, commands, eof
"""
from __future__ import annotations

import argparse
import os
import pty
import re
import select
import signal
import tempfile
import time

CTRL_C, CTRL_D = b"\x03", b"\x04"


CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z~])|\x1b[O=>].?")


def render(raw: str) -> str:
    lines, row, col = [""], 0, 0
    pos = 0
    while pos < len(raw):
        m = CSI.match(raw, pos)
        if m:
            arg, cmd = m.group(1), m.group(2)
            n = int(arg) if arg and arg.isdigit() else 1
            if cmd == "K":
                lines[row] = lines[row][:col]
            elif cmd == "C":
                col += n
            elif cmd == "D":
                col = max(0, col - n)
            pos = m.end()
            continue
        ch = raw[pos]
        pos += 1
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif ch >= " " or ch == "\t":
            line = lines[row].ljust(col)
            lines[row] = line[:col] + ch + line[col + 1 :]
            col += 1
    return "\n".join(lines)


class Term:
    """A program on a pty: send keys, wait for text on the screen, collect the exit code."""

    def __init__(self, argv: list[str], home: str):
        self.out = b""
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            env = dict(os.environ, HOME=home, TERM="xterm")
            os.execve(argv[0], argv, env)
        self.status: int | None = None
        print("+", " ".join(argv), flush=True)

    def _read(self, timeout: float) -> None:
        r, _, _ = select.select([self.fd], [], [], timeout)
        if r:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            self.out += data
            if not data:
                self._reap(block=True)

    def _reap(self, block: bool) -> None:
        if self.status is None:
            pid, st = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)

    def expect(self, pattern: str, timeout: float = 30, start: int = 0) -> re.Match:
        """Waits until `pattern` (a regex over the decoded screen since `start`) appears."""
        end = time.time() + timeout
        while True:
            m = re.search(pattern, self.text(start), re.S)
            if m:
                return m
            if time.time() > end or (self.status is not None):
                raise AssertionError(
                    f"timed out waiting for {pattern!r}; screen:\n{self.text()[-3000:]}"
                )
            self._read(0.05)
            self._reap(block=False)

    def text(self, start: int = 0) -> str:
        """What the screen shows of the output since `start`, as lines of text: the line
        editor's redraws (carriage return, erase to the end of the line, cursor moves) are
        played as a terminal plays them."""
        return render(self.out[start:].decode("utf-8", "replace"))

    def send(self, data: bytes | str) -> None:
        os.write(self.fd, data.encode() if isinstance(data, str) else data)

    def wait(self, timeout: float = 30) -> int:
        end = time.time() + timeout
        while self.status is None:
            if time.time() > end:
                os.kill(self.pid, signal.SIGKILL)
                raise AssertionError(f"still running; screen:\n{self.text()[-3000:]}")
            self._read(0.05)
            self._reap(block=False)
        return self.status

    def alive(self) -> bool:
        self._reap(block=False)
        return self.status is None


def ml_run(a, *args: str) -> list[str]:
    return [os.path.join(a.bin, "ml_run"), "-m", os.path.join(a.work, "llama-q8_0.mlb"), *args]


def case_interrupt_reply(a, home: str) -> None:
    """Ctrl-C during a reply stops it and returns to the prompt with the conversation kept; Ctrl-C
    at an empty prompt quits."""
    t = Term(ml_run(a, "--chat", "llama3", "-n", "-1", "--ignore-eos", "-c", "2048", "-v"), home)
    t.expect(r"\n> $")
    mark = len(t.out)
    t.send("Tell me a long story\r")
    # The reply streams (no end-of-text on a random model, so it would run until the context is
    # full, seconds away): interrupt it once some of it is on the screen.
    t.expect(r"story\r?\n.{80}", start=mark)
    t.send(CTRL_C)
    t.expect(r"reply interrupted.*\n> $", timeout=10, start=mark)
    assert t.alive(), "ml_run died on Ctrl-C during a reply"
    first = re.search(
        r"prompt: (\d+) tokens \(0 cached\).*?generated: (\d+) tokens", t.text(mark), re.S
    )
    assert first and int(first.group(2)) > 0, t.text(mark)[-1000:]
    # The next turn continues the same conversation: its prompt starts with the first message
    # (reused from the cache) and holds the interrupted reply (re-tokenized from its text).
    t.send("/set n 4\r")
    mark = len(t.out)
    t.send("And then?\r")
    m = t.expect(r"prompt: (\d+) tokens \((\d+) cached\)", start=mark)
    cached, total = int(m.group(2)), int(m.group(1)) + int(m.group(2))
    assert cached >= int(first.group(1)) - 1, f"the first message was not reused: {m.group(0)}"
    assert total > int(first.group(1)) + 8, f"the conversation was not kept: {m.group(0)}"
    t.expect(r"\n> $", start=mark)
    t.send(CTRL_C)  # at an empty prompt: quit
    rc = t.wait()
    assert rc == 130, rc
    print("ok: Ctrl-C stops a reply, keeps the conversation; at an empty prompt it quits")


def case_interrupt_oneshot(a, home: str) -> None:
    """One-shot mode: Ctrl-C stops the generation, prints the speed line, exits 130."""
    t = Term(ml_run(a, "-p", "Once upon a time", "-n", "-1", "--ignore-eos", "-c", "2048"), home)
    t.expect(r"Once upon a time.{80}")
    t.send(CTRL_C)
    rc = t.wait()
    assert rc == 130, (rc, t.text()[-500:])
    assert re.search(r"generated: \d+ tokens", t.text()), t.text()[-500:]
    print("ok: one-shot Ctrl-C prints the speed line and exits 130")


def case_full_context(a, home: str) -> None:
    """A 64-token context fills after a few turns; the oldest exchanges are dropped (the
    system prompt kept) and every later turn still gets a reply."""
    t = Term(
        ml_run(
            a,
            "--chat",
            "llama3",
            "-c",
            "64",
            "-n",
            "8",
            "--temp",
            "0",
            "-v",
            "--system",
            "Be brief.",
        ),
        home,
    )
    t.expect(r"\n> $")
    replies = 0
    for i in range(8):
        mark = len(t.out)
        t.send(f"Question number {i}\r")
        t.expect(r"generated: \d+ tokens.*\n> $", start=mark)
        replies += 1
        assert "error" not in t.text(mark), t.text(mark)
    assert "dropped the" in t.text() and "kept the system prompt" in t.text(), t.text()[-2000:]
    # A message that cannot fit even alone is refused for that turn; the chat goes on.
    mark = len(t.out)
    t.send("word " * 80 + "\r")
    t.expect(r"this message needs \d+ tokens.*\n> $", start=mark)
    mark = len(t.out)
    t.send("Short again\r")
    t.expect(r"generated: \d+ tokens.*\n> $", start=mark)
    t.send(CTRL_D)
    assert t.wait() == 0
    print(f"ok: {replies + 1} turns in a 64-token context, oldest exchanges dropped")


def case_commands(a, home: str) -> None:
    """Slash commands, a multi-line message, and line history across runs."""
    t = Term(ml_run(a, "--chat", "llama3", "-n", "4", "--temp", "0", "-v"), home)
    t.expect(r"\n> $")
    for cmd, want in (
        ("/help", r"/clear.*/bye"),
        ("/set top-k 5", r"\n> $"),
        ("/set temp abc", r"/set temp: .*not a number"),
        ("/set top-p 2", r"outside \[0, 1\]"),
        ("/set nonsense 1", r"unknown setting"),
        ("/show", r"top-k 5 "),
        ("/frobnicate", r"unknown command /frobnicate"),
        ("/set system You are terse.", r"system prompt set"),
        ("/clear", r"conversation cleared"),
    ):
        mark = len(t.out)
        t.send(cmd + "\r")
        t.expect(want + r".*\n> $" if not want.endswith("$") else want, start=mark)
    mark = len(t.out)
    t.send('"""First line\r')
    t.expect(r"\.\.\. $", start=mark)
    t.send('second line"""\r')
    m = t.expect(r"prompt: (\d+) tokens", start=mark)
    assert int(m.group(1)) > 5, m.group(0)
    t.expect(r"\n> $", start=mark)
    t.send("/bye\r")
    assert t.wait() == 0
    hist = os.path.join(home, ".krafla_history")
    assert os.path.exists(hist) and "/set top-k 5" in open(hist).read(), "no history file"
    # The history is there in the next run: Up recalls the last line.
    t = Term(ml_run(a, "--chat", "llama3", "-n", "4", "--temp", "0"), home)
    t.expect(r"\n> $")
    mark = len(t.out)
    t.send(b"\x1b[A")
    t.expect(r"/bye", start=mark)
    t.send(b"\x15")  # Ctrl-U: clear the recalled line
    t.send(CTRL_D)
    assert t.wait() == 0
    print("ok: slash commands, multi-line message, history")


def case_eof(a, home: str) -> None:
    """Ctrl-D at the prompt ends the chat with exit 0 on a fresh line."""
    t = Term(ml_run(a, "--chat", "llama3", "-n", "2"), home)
    t.expect(r"\n> $")
    t.send(CTRL_D)
    assert t.wait() == 0
    assert t.text().endswith("\n"), repr(t.text()[-20:])
    print("ok: Ctrl-D quits")


CASES = {
    "interrupt_reply": case_interrupt_reply,
    "interrupt_oneshot": case_interrupt_oneshot,
    "full_context": case_full_context,
    "commands": case_commands,
    "eof": case_eof,
}


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("cases", nargs="*", default=list(CASES))
    a = p.parse_args()
    for name in a.cases:
        with tempfile.TemporaryDirectory() as home:
            CASES[name](a, home)


if __name__ == "__main__":
    main()
