"""Host side of the UART frames of eerie-c firmware (runtime_c/eerie_uart.h describes them).

Python's standard library only: eerie-c copies this file into every firmware project for a
UART board as runtime/eerie_serial.py, where it runs on its own:

    python3 runtime/eerie_serial.py --qemu netduinoplus2 NAME.elf          # QEMU, UART on stdio
    python3 runtime/eerie_serial.py --port /dev/ttyUSB0 [--baud 115200]    # a physical board

Either way it sends inputs.bin (whole records, back to back) one record per READY, writes
the outputs to outputs.bin, prints the board's text lines ("eerie: ...") and exits with the
board's exit status. Under QEMU it ends the emulator when the board sends DONE: the firmware
has no semihosting to make QEMU exit by itself.
"""
from __future__ import annotations

import argparse
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field

MAGIC = b"\xee\xc0"
READY, OUTPUT, TEXT, DONE = b"R", b"O", b"T", b"D"      # board -> host
INPUT, END, QUERY = b"I", b"X", b"Q"                     # host -> board
HEADER = struct.Struct("<cI")                            # type, payload length
MAX_PAYLOAD = 16 << 20
BOOT_TIMEOUT = 60.0      # the first frame: the board is booting (or being reset by hand)
PROBE_EVERY = 1.0        # on a serial port: ask again for READY while none has come


class LinkError(Exception):
    """The board and the host did not manage to exchange the frames."""


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    head = HEADER.pack(kind, len(payload))
    return MAGIC + head + payload + struct.pack("<I", zlib.crc32(head + payload))


class Link:
    """Frames over a pair of file descriptors (pipes to QEMU, or one serial port), with a
    deadline for the whole exchange."""

    def __init__(self, rfd: int, wfd: int, deadline: float):
        self.rfd, self.wfd, self.deadline = rfd, wfd, deadline
        self.limit = max(0.0, deadline - time.monotonic())   # for the messages
        self.buf = bytearray()
        # Non-blocking writes: a board that stops reading mid-frame must not hold the host
        # past its deadline inside one write.
        os.set_blocking(wfd, False)

    def _fill(self, until: float) -> bool:
        """Read what is available; False if nothing came before `until`."""
        left = min(until, self.deadline) - time.monotonic()
        if left <= 0 or not select.select([self.rfd], [], [], left)[0]:
            if time.monotonic() >= self.deadline:
                raise LinkError(f"timed out waiting for the board ({self.limit:g} s for the whole run)")
            return False
        try:
            chunk = os.read(self.rfd, 65536)
        except BlockingIOError:   # a serial port shares the (non-blocking) descriptor
            return True
        if not chunk:
            raise LinkError("the serial line closed before the board said it was done")
        self.buf += chunk
        return True

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill(self.deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def recv(self, until: float | None = None) -> tuple[bytes, bytes] | None:
        """The next frame (type, payload), skipping bytes before its magic; None if no frame
        started before `until`."""
        until = self.deadline if until is None else until
        while True:
            at = self.buf.find(MAGIC)
            if at >= 0:
                del self.buf[:at]
                break
            del self.buf[:max(0, len(self.buf) - 1)]   # keep a possible first magic byte
            if not self._fill(until):
                return None
        head = self._take(len(MAGIC) + HEADER.size)[len(MAGIC):]
        kind, length = HEADER.unpack(head)
        if length > MAX_PAYLOAD:
            raise LinkError(f"a frame from the board claims {length} bytes: the line is garbled")
        payload = self._take(length)
        (crc,) = struct.unpack("<I", self._take(4))
        if crc != zlib.crc32(head + payload):
            raise LinkError(f"a {kind!r} frame from the board failed its checksum: the line is garbled")
        return kind, payload

    def send(self, kind: bytes, payload: bytes = b""):
        data = memoryview(frame(kind, payload))
        while data:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([], [self.wfd], [], left)[1]:
                raise LinkError(f"timed out sending to the board ({self.limit:g} s for the whole run)")
            try:
                data = data[os.write(self.wfd, data[:65536]):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise LinkError("the serial line closed before the board said it was done") from None


@dataclass
class Exchange:
    status: int                  # the board's exit status (from DONE)
    text: str                    # its console lines
    outputs: list[bytes] = field(default_factory=list)


def exchange(link: Link, inputs: bytes, probe: bool = False, echo=None) -> Exchange:
    """Run the board's side of the protocol to its DONE: a record for each READY, END after
    the last. `probe`: send QUERY while no READY has come (a physical board that booted
    before the host opened the port has already sent its first READY)."""
    text, outputs, sent, record_bytes = [], [], 0, None
    boot = time.monotonic()
    while True:
        if record_bytes is None:   # waiting for the board's first frame
            until = time.monotonic() + (PROBE_EVERY if probe else BOOT_TIMEOUT)
            got = link.recv(until)
            if got is None:
                if time.monotonic() - boot >= BOOT_TIMEOUT:
                    raise LinkError(f"no frame from the board within {BOOT_TIMEOUT:g} s: is it running "
                                    f"this firmware, and is its UART wired to this port?")
                if probe:
                    link.send(QUERY)
                continue
        else:
            got = link.recv()
        kind, payload = got
        if kind == READY:
            n, rb, ob = struct.unpack("<III", payload)
            if record_bytes is None:
                record_bytes = rb
                if rb == 0 or len(inputs) % rb:
                    raise LinkError(f"the inputs hold {len(inputs)} bytes, not a whole number of the "
                                    f"firmware's {rb}-byte records")
            if n < sent:
                continue   # READY again (an answer to a QUERY): that record is on its way
            if n * rb >= len(inputs):
                link.send(END)
            else:
                link.send(INPUT, inputs[n * rb:(n + 1) * rb])
            sent = n + 1
        elif kind == OUTPUT:
            outputs.append(payload)
        elif kind == TEXT:
            line = payload.decode("utf-8", "replace")
            text.append(line)
            if echo is not None:
                echo(line)
        elif kind == DONE:
            (status,) = struct.unpack("<i", payload)
            return Exchange(status, "".join(text), outputs)
        else:
            raise LinkError(f"an unknown frame type {kind!r} from the board")


def qemu_serial_command(machine: str, elf: str, qemu: str = "qemu-system-arm") -> list[str]:
    """QEMU with the board's first UART on its stdin/stdout: a plain (unmultiplexed) stdio
    chardev passes every byte through, and -icount shift=0 makes SysTick count instructions."""
    return [qemu, "-M", machine, "-nographic", "-monitor", "none", "-icount", "shift=0",
            "-chardev", "stdio,id=uart0,signal=off", "-serial", "chardev:uart0", "-kernel", elf]


def qemu_version(qemu: str = "qemu-system-arm") -> tuple[int, int]:
    """(major, minor), or (0, 0) if it cannot be run (whoever runs it next says why)."""
    try:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return (0, 0)
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def run_qemu(cmd: list[str], inputs: bytes, timeout: float, echo=None) -> Exchange:
    """Boot QEMU, run the exchange, end QEMU. A failure's LinkError carries QEMU's message."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        try:
            link = Link(p.stdout.fileno(), p.stdin.fileno(), time.monotonic() + timeout)
            try:
                return exchange(link, inputs, echo=echo)
            except LinkError as e:
                p.kill()
                p.wait()
                err.seek(0)
                stderr = err.read().decode("utf-8", "replace").strip()
                if p.returncode not in (None, -9) and "closed" in str(e):
                    e = LinkError(f"QEMU exited (status {p.returncode}) before the board said it was done")
                hint = ""
                if "Lockup" in stderr:
                    hint = (" (a fault inside the fault handler; an image with its stack or arena in the "
                            "STM32F4's CCM needs QEMU >= 8.0, older versions have none: build with CCM=0)")
                raise LinkError(f"{e}{hint}" + (f": {_gist(stderr)}" if stderr else "")) from None
        finally:
            if p.poll() is None:
                p.kill()   # the board said DONE (or the exchange failed): QEMU never exits by itself
            p.wait()
            for f in (p.stdin, p.stdout):
                try:
                    f.close()
                except OSError:
                    pass


def _gist(stderr: str) -> str:
    """QEMU's message in a line: its fatal/error lines (a lockup is followed by a register
    dump), else its last lines."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    key = [ln for ln in lines if "fatal" in ln or "error" in ln.lower()]
    return " | ".join((key or lines[-3:])[:3])[:600]


def open_port(path: str, baud: int) -> int:
    """A serial port in raw mode (8N1, no flow control, no echo) at `baud`."""
    import termios
    import tty
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    attrs = termios.tcgetattr(fd)
    speed = getattr(termios, f"B{baud}", None)
    if speed is None:
        raise LinkError(f"baud rate {baud} is not one termios knows")
    attrs[4] = attrs[5] = speed
    attrs[2] = (attrs[2] | termios.CLOCAL | termios.CREAD) & ~(termios.CSTOPB | getattr(termios, "CRTSCTS", 0))
    termios.tcsetattr(fd, termios.TCSANOW, attrs)
    termios.tcflush(fd, termios.TCIOFLUSH)   # whatever the board sent before we listened
    return fd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run an eerie-c UART firmware: send inputs.bin, "
                                             "receive outputs.bin and the board's report lines.")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--qemu", nargs=2, metavar=("MACHINE", "ELF"), help="boot ELF on this QEMU machine")
    where.add_argument("--port", help="a physical board's serial port, e.g. /dev/ttyUSB0")
    ap.add_argument("--baud", type=int, default=115200)
    ap.add_argument("--qemu-bin", default="qemu-system-arm")
    ap.add_argument("--inputs", default="inputs.bin")
    ap.add_argument("--outputs", default="outputs.bin")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for the whole run")
    a = ap.parse_args(argv)
    with open(a.inputs, "rb") as f:
        inputs = f.read()

    def echo(line):
        sys.stdout.write(line)
        sys.stdout.flush()
    try:
        if a.qemu:
            res = run_qemu(qemu_serial_command(a.qemu[0], a.qemu[1], a.qemu_bin), inputs, a.timeout, echo)
        else:
            fd = open_port(a.port, a.baud)
            try:
                res = exchange(Link(fd, fd, time.monotonic() + a.timeout), inputs, probe=True, echo=echo)
            finally:
                os.close(fd)
    except (LinkError, OSError) as e:
        print(f"eerie-serial: {e}", file=sys.stderr)
        return 2
    with open(a.outputs, "wb") as f:
        f.write(b"".join(res.outputs))
    return res.status


if __name__ == "__main__":
    sys.exit(main())
