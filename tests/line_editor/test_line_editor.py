"""LineEditor through a pseudo-terminal: keystrokes in, the driver's JSON results out.

The driver's stdin and stderr are the pty's slave (its controlling terminal, so that a Ctrl-C
the editor failed to catch would kill it), its stdout a pipe carrying one JSON object per read.
The editor turns bracketed paste on right after entering raw mode, once per read: keys are sent
only after that marker, never into the cooked terminal.

    test_line_editor.py DRIVER
"""
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import unittest

DRIVER = None
RAW_MARK = b"\x1b[?2004h"
LEFT, RIGHT, UP, DOWN = "\x1b[D", "\x1b[C", "\x1b[A", "\x1b[B"
DELETE = "\x1b[3~"
TIMEOUT = 10


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Driver:
    def __init__(self, *args, cols=80, ignore_hup=False):
        self.master, self.slave = os.openpty()
        set_size(self.slave, 24, cols)
        self.before = termios.tcgetattr(self.slave)
        self.proc = subprocess.Popen(
            [DRIVER, *args],
            stdin=self.slave,
            stderr=self.slave,
            stdout=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=lambda: self._child_setup(ignore_hup),
        )
        self.screen = b""  # everything the editor wrote to the terminal
        self.out = b""
        self.reads = 0  # reads whose keys were sent

    @staticmethod
    def _child_setup(ignore_hup):
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if ignore_hup:  # else closing the master kills the session leader with SIGHUP
            signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def pump(self, timeout):
        """Reads what is available from the terminal and stdout; False on timeout."""
        fds = [self.master, self.proc.stdout.fileno()]
        ready, _, _ = select.select(fds, [], [], timeout)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the slave side is gone
                data = b""
            if fd == self.master:
                self.screen += data
            else:
                self.out += data
        return bool(ready)

    def wait(self, cond, what):
        deadline = time.monotonic() + TIMEOUT
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; screen {self.screen[-300:]!r}")
            self.pump(0.05)

    def wait_drawn(self, text, count):
        """Waits until this read has drawn `text` `count` times."""
        start = self.screen.rfind(RAW_MARK)
        self.wait(lambda: self.screen.count(text, start) >= count, f"{text!r} drawn {count} times")

    def wait_raw(self):
        self.wait(lambda: self.screen.count(RAW_MARK) > self.reads, "raw mode")
        self.reads += 1

    def result(self):
        self.wait(lambda: b"\n" in self.out, "a result")
        line, self.out = self.out.split(b"\n", 1)
        return json.loads(line.decode())

    def send(self, *chunks, pause=0.0):
        """One read: waits for raw mode, types the chunks, returns (result, text)."""
        self.wait_raw()
        for i, chunk in enumerate(chunks):
            if i and pause:
                time.sleep(pause)
            os.write(self.master, chunk.encode() if isinstance(chunk, str) else chunk)
        r = self.result()
        return r["result"], r["text"]

    def line(self, *chunks, **kw):
        result, text = self.send(*chunks, **kw)
        assert result == "line", (result, text)
        return text

    def finish(self):
        """Waits for the exit (rc 0); the terminal must be back in the mode it started in."""
        deadline = time.monotonic() + TIMEOUT
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.pump(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
            raise AssertionError("the driver did not exit")
        self.pump(0)
        assert self.proc.returncode == 0, self.proc.returncode
        after = termios.tcgetattr(self.slave)
        self.close()
        assert after == self.before, f"terminal mode not restored: {self.before} -> {after}"

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        os.close(self.master)
        os.close(self.slave)


class LineEditorTest(unittest.TestCase):
    def setUp(self):
        self.d = Driver()

    def tearDown(self):
        if self.d.proc.poll() is None:
            self.assertEqual(self.d.send("\x04"), ("eof", ""))
            self.d.finish()

    def test_plain_typing(self):
        self.assertEqual(self.d.line("hello world\r"), "hello world")
        self.assertEqual(self.d.line("lf ends too\n"), "lf ends too")
        # The last redraw shows the prompt and the text, and the echo goes to the terminal.
        self.assertIn(b"\r> lf ends too\x1b[K", self.d.screen)

    def test_raw_mode_during_read(self):
        self.d.wait_raw()
        lflag = termios.tcgetattr(self.d.slave)[3]
        self.assertFalse(lflag & (termios.ICANON | termios.ECHO | termios.ISIG))
        self.d.reads -= 1  # send() waits for the same mark again
        self.assertEqual(self.d.line("x\r"), "x")

    def test_edit_in_the_middle(self):
        self.assertEqual(self.d.line("helo", LEFT, "l", RIGHT, "!\r"), "hello!")
        self.assertEqual(
            self.d.line("ac", LEFT, "b", LEFT, LEFT, "_", "\x1bOC", "\x1bOD", "\r"), "_abc"
        )

    def test_multibyte(self):
        text = "a😀b日本é"
        # Left twice → before 本; Backspace removes 日; End, Backspace removes é.
        self.assertEqual(self.d.line(text, LEFT, LEFT, "\x7f", "\x05", "\x08\r"), "a😀b本")
        # Home, Right past a, Delete removes the whole emoji; Right over 本 then insert.
        self.assertEqual(self.d.line(text, "\x01", RIGHT, DELETE, RIGHT, RIGHT, "|\r"), "ab日|本é")
        self.assertEqual(self.d.line("é", LEFT, "ü", RIGHT, "ñ\r"), "üéñ")

    def test_split_multibyte_arrives_whole(self):
        data = "日".encode()
        self.assertEqual(self.d.line(data[:1], data[1:2], data[2:], b"\r", pause=0.05), "日")
        # A lead byte cut short by ASCII: the broken sequence is dropped, the ASCII kept.
        self.assertEqual(self.d.line(b"a\xe6x\r"), "ax")

    def test_home_end_variants(self):
        homes = ["\x1b[H", "\x1b[1~", "\x1b[7~", "\x1bOH", "\x01"]
        ends = ["\x1b[F", "\x1b[4~", "\x1b[8~", "\x1bOF", "\x05"]
        for home, end in zip(homes, ends):
            self.assertEqual(self.d.line("bc", home, "a", end, "d\r"), "abcd", (home, end))

    def test_kill_keys(self):
        self.assertEqual(self.d.line("abc def", LEFT * 3, "\x15\r"), "def")  # Ctrl-U
        self.assertEqual(self.d.line("abc def", LEFT * 3, "\x0b\r"), "abc ")  # Ctrl-K
        self.assertEqual(self.d.line("foo bar  baz\x17\r"), "foo bar  ")  # Ctrl-W
        self.assertEqual(self.d.line("foo bar  baz\x17\x17\r"), "foo ")
        self.assertEqual(self.d.line("日本 語\x17\r"), "日本 ")

    def test_word_moves(self):
        self.assertEqual(
            self.d.line(
                "one two", "\x1b[1;5D", "_", "\x1b[1;5D", "\x1b[1;5D", "^", "\x1bf", "\x1bf", "$\r"
            ),
            "^one _two$",
        )

    def test_history(self):
        for t in ["one", "two", "three"]:
            self.assertEqual(self.d.line(t + "\r"), t)
        # Up and Down come back to the line being edited.
        self.assertEqual(self.d.line("draft", UP, UP, DOWN, DOWN, "!\r"), "draft!")
        # A repeat of the newest entry is not added: two Ups reach three.
        self.assertEqual(self.d.line(UP, "\r"), "draft!")
        self.assertEqual(self.d.line(UP, UP, "\r"), "three")
        # Edit a recalled entry, move away and back: the edit stays for this read…
        self.assertEqual(self.d.line(UP * 4, "\x7f", "in", UP, DOWN, "\r"), "twin")
        # …but the history keeps the original.
        self.assertEqual(self.d.line(UP * 5, "\r"), "two")
        self.assertEqual(self.d.line(UP, UP, "\x10", "\x0e", "\r"), "twin")  # Ctrl-P, Ctrl-N
        # Past the oldest and the newest nothing moves.
        self.assertEqual(self.d.line(UP * 20, "\r"), "one")
        self.assertEqual(self.d.line("new", DOWN * 3, "\r"), "new")

    def test_ctrl_c(self):
        self.assertEqual(self.d.send("abc\x03"), ("interrupt", "abc"))
        self.assertIsNone(self.d.proc.poll())
        self.assertEqual(self.d.line("def\r"), "def")
        self.assertEqual(self.d.send("\x03"), ("interrupt", ""))
        # An interrupted line is not history.
        self.assertEqual(self.d.line(UP, "\r"), "def")

    def test_ctrl_d(self):
        self.assertEqual(self.d.line("abc", "\x01", "\x04\r"), "bc")
        self.assertEqual(self.d.line("abc\x04\r"), "abc")  # at the end: nothing to delete
        self.assertEqual(self.d.send("\x04"), ("eof", ""))
        self.d.finish()

    def test_unknown_escapes_swallowed(self):
        keys = [
            "a",
            "\x1b[99~",
            "b",
            "\x1b[1;2P",
            "c",
            "\x1bOQ",
            "d",
            "\x1b[?25h",
            "e",
            "\x1bx",
            "f",
            "\x1b[15;5~",
            "g\r",
        ]
        self.assertEqual(self.d.line(*keys), "abcdefg")
        # A lone Esc is dropped (after its timeout, which the redraw shows); the key after it is
        # typed normally.
        self.d.wait_raw()
        os.write(self.d.master, b"ab")
        self.d.wait_drawn(b"\r> ab\x1b[K", 1)
        os.write(self.d.master, b"\x1b")
        self.d.wait_drawn(b"\r> ab\x1b[K", 2)
        os.write(self.d.master, b"c\r")
        self.assertEqual(self.d.result(), {"result": "line", "text": "abc"})
        # Other control keys do nothing.
        self.assertEqual(self.d.line("a\x07\x13\x11\x1a\x1cb\r"), "ab")

    def test_bracketed_paste(self):
        self.assertEqual(
            self.d.line("> ", "\x1b[200~line 1\r\nline 2\rline 3\x1b[201~", "!\r"),
            "> line 1\nline 2\nline 3!",
        )
        self.assertIn("↵".encode(), self.d.screen)

    def test_ctrl_l(self):
        self.assertEqual(self.d.line("ab\x0cc\r"), "abc")
        self.assertIn(b"\x1b[2J", self.d.screen)

    def test_sigwinch(self):
        self.d.wait_raw()
        os.write(self.d.master, b"ab")
        self.d.wait_drawn(b"\r> ab\x1b[K", 1)
        set_size(self.d.slave, 24, 40)
        self.d.proc.send_signal(signal.SIGWINCH)
        time.sleep(0.1)
        self.d.reads -= 1
        self.assertEqual(self.d.line("c\r"), "abc")


class ExitPathsTest(unittest.TestCase):
    """Each way out of read() restores the terminal (the driver exits right after one read)."""

    def check(self, keys, expected):
        d = Driver("--max", "1")
        try:
            self.assertEqual(d.send(*keys), expected)
            d.finish()
        finally:
            if d.proc.poll() is None:
                d.close()

    def test_line(self):
        self.check(["hi\r"], ("line", "hi"))

    def test_interrupt(self):
        self.check(["hi\x03"], ("interrupt", "hi"))

    def test_eof(self):
        self.check(["\x04"], ("eof", ""))

    def test_hangup(self):
        d = Driver(ignore_hup=True)
        d.wait_raw()
        os.close(d.master)  # the terminal goes away: end of input
        out = d.proc.communicate(timeout=TIMEOUT)[0]
        self.assertEqual(json.loads(out.decode()), {"result": "eof", "text": ""})
        os.close(d.slave)


class LongLineTest(unittest.TestCase):
    def test_scrolls_inside_one_row(self):
        d = Driver(cols=20)
        try:
            text = "".join(chr(ord("a") + i % 26) for i in range(100))
            self.assertEqual(d.line(text, "\x01", "<", "\x05", ">\r"), "<" + text + ">")
            # No redraw writes more than the row holds: prompt + text within 19 columns.
            for draw in d.screen.split(b"\r> ")[1:]:
                shown = draw.split(b"\x1b[K")[0]
                self.assertLessEqual(len(shown), 17, draw)
            self.assertEqual(d.send("\x04"), ("eof", ""))
            d.finish()
        finally:
            if d.proc.poll() is None:
                d.close()


class HistoryFileTest(unittest.TestCase):
    def test_persisted_and_reloaded(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "history")
            d = Driver(path)
            for t in ["first", "second", "second", "back\\slash", ""]:
                self.assertEqual(d.line(t + "\r"), t)
            self.assertEqual(d.line("\x1b[200~two\nlines\x1b[201~\r"), "two\nlines")
            self.assertEqual(d.send("\x04"), ("eof", ""))
            d.finish()
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read(), "first\nsecond\nback\\\\slash\ntwo\\nlines\n")

            d = Driver(path)
            self.assertEqual(d.line(UP, "\r"), "two\nlines")
            self.assertEqual(d.line(UP, UP, "\r"), "back\\slash")
            self.assertEqual(d.line(UP * 4, "\r"), "second")
            self.assertEqual(d.line(UP * 9, "\r"), "first")
            self.assertEqual(d.send("\x04"), ("eof", ""))
            d.finish()
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read().count("\n"), 7)

    def test_capped(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "history")
            with open(path, "w") as f:
                f.writelines(f"entry {i}\n" for i in range(2500))
            d = Driver(path)
            self.assertEqual(d.line(UP * 1200, "\r"), "entry 1500")  # the newest 1000 kept
            self.assertEqual(d.send("\x04"), ("eof", ""))
            d.finish()
            with open(path) as f:  # compacted on load, then one append
                lines = f.read().splitlines()
            self.assertEqual(len(lines), 1001)
            self.assertEqual(lines[0], "entry 1500")


class NotATerminalTest(unittest.TestCase):
    def test_pipe(self):
        p = subprocess.run(
            [DRIVER], input="hello\nwörld\r\nlast".encode(), capture_output=True, timeout=TIMEOUT
        )
        self.assertEqual(p.returncode, 0)
        results = [json.loads(line) for line in p.stdout.decode().splitlines()]
        self.assertEqual(
            results,
            [
                {"result": "line", "text": "hello"},
                {"result": "line", "text": "wörld"},
                {"result": "line", "text": "last"},
                {"result": "eof", "text": ""},
            ],
        )
        self.assertEqual(p.stderr, b"> " * 4)  # prompts only: no escape codes

    def test_stdin_tty_stderr_pipe(self):
        # Both must be terminals for editing; otherwise plain reads, and the terminal untouched.
        master, slave = os.openpty()
        before = termios.tcgetattr(slave)
        p = subprocess.Popen([DRIVER], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.write(master, b"plain\n\x04")
        out, err = p.communicate(timeout=TIMEOUT)
        self.assertEqual([json.loads(x)["text"] for x in out.decode().splitlines()], ["plain", ""])
        self.assertEqual(err, b"> > ")
        self.assertEqual(termios.tcgetattr(slave), before)
        os.close(master)
        os.close(slave)


if __name__ == "__main__":
    DRIVER = os.path.abspath(sys.argv[1])
    unittest.main(argv=sys.argv[:1], verbosity=2)
