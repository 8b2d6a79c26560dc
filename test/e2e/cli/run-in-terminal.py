"""Runs a command in a real pseudo-terminal, as a person's terminal would, for the CLI tests.

Usage: python3 run-in-terminal.py [--type-after TEXT] COMMAND [ARG]...
The command's stdin, stdout and stderr are the terminal (80 columns). What this script reads on its
own stdin is typed into the terminal (with --type-after, only once the command has printed TEXT);
everything the command prints is copied to this script's stdout, byte for byte; the exit code is
the command's.
"""
import fcntl
import os
import pty
import select
import struct
import sys
import termios

command = sys.argv[1:]
wait_for = None
if command[0] == "--type-after":
    wait_for, command = command[1].encode(), command[2:]

pid, terminal = pty.fork()
if pid == 0:
    os.execvp(command[0], command)

fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
typing = sys.stdin.fileno()
held = b""  # typed, waiting for wait_for
printed_so_far = b""
while True:
    readers = [terminal] + ([typing] if typing is not None else [])
    ready, _, _ = select.select(readers, [], [])
    if typing in ready:
        typed = os.read(typing, 4096)
        if typed:
            held += typed
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
        if wait_for is not None and wait_for not in printed_so_far:
            printed_so_far = (printed_so_far + printed)[-65536:]
    if held and (wait_for is None or wait_for in printed_so_far):
        os.write(terminal, held)
        held = b""

_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
