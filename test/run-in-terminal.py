"""Runs a command in a real pseudo-terminal, as a person's terminal would, for the CLI tests.

Usage: python3 run-in-terminal.py COMMAND [ARG]...
The command's stdin, stdout and stderr are the terminal (80 columns). What this script reads on its
own stdin is typed into the terminal; everything the command prints is copied to this script's
stdout, byte for byte; the exit code is the command's.
"""
import fcntl
import os
import pty
import select
import struct
import sys
import termios

pid, terminal = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])

fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
typing = sys.stdin.fileno()
while True:
    readers = [terminal] + ([typing] if typing is not None else [])
    ready, _, _ = select.select(readers, [], [])
    if typing in ready:
        typed = os.read(typing, 4096)
        if typed:
            os.write(terminal, typed)
        else:
            typing = None
    if terminal in ready:
        try:
            printed = os.read(terminal, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not printed:
            break
        sys.stdout.buffer.write(printed)
        sys.stdout.buffer.flush()

_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
