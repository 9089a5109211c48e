"""The top process of one verification run: start it, keep its output bounded, leave nothing behind.

    python -m gpulint.verify.supervise --log run.log --log-max 8388608 -- python -m gpulint.verify.harness ...

It becomes a child subreaper (orphans of the run come back to it), copies the run's output
into a log that rotates at --log-max bytes (at most two files: a script printing 400 MB
leaves 2 x --log-max on disk), and when the run ends, or when gpulint sends SIGTERM, it ends
every process still left below it (servers the script started in a new session, daemons,
DataLoader workers) before it exits with the run's status. No torch here.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import BinaryIO, Optional, Sequence

from gpulint.verify import proctree

CHUNK = 1 << 16


class RotatingLog:
    """Appends bytes to `path`; when it reaches `limit`, it becomes `path.1` (replacing the older one)."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = max(1024, limit)
        self.total = 0
        self.rotations = 0
        self._size = 0
        self._file: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()

    def write(self, data: bytes) -> None:
        self.total += len(data)
        while data:
            room = self.limit - self._size
            part, data = data[:room], data[room:]
            self._file.write(part)
            self._size += len(part)
            if self._size >= self.limit:
                self._rotate()
        self._file.flush()

    def _rotate(self) -> None:
        self._file.close()
        os.replace(self.path, rotated(self.path))
        self._file = open(self.path, "wb")  # noqa: SIM115
        self._size = 0
        self.rotations += 1

    def close(self) -> None:
        self._file.close()
        meta = {"bytes_total": self.total, "rotations": self.rotations, "limit": self.limit}
        meta_path(self.path).write_text(json.dumps(meta), encoding="utf-8")


def rotated(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def read_tail(path: Path, limit: int) -> str:
    """The last `limit` bytes of the run's output, reading only those (from the rotated file too if needed)."""
    chunks: list[bytes] = []
    need = limit
    for candidate in (path, rotated(path)):
        try:
            with open(candidate, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - need))
                data = handle.read(need)
        except OSError:
            continue
        chunks.insert(0, data)
        need -= len(data)
        if need <= 0:
            break
    return b"".join(chunks).decode("utf-8", errors="replace")


def read_meta(path: Path) -> dict:
    try:
        return json.loads(meta_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


class _Stop(Exception):
    """Raised by the signal handler in the main thread: gpulint asked the run to end."""


def _pump(stream: BinaryIO, log: RotatingLog) -> None:
    while True:
        data = stream.read1(CHUNK) if hasattr(stream, "read1") else stream.read(CHUNK)
        if not data:
            return
        log.write(data)


def supervise(command: Sequence[str], log_path: Path, log_max: int) -> int:
    proctree.become_subreaper()
    proctree.die_with_parent(signal.SIGTERM)
    token = os.environ.get(proctree.TOKEN_ENV)

    def stop(signum: int, frame: Optional[FrameType]) -> None:
        raise _Stop()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    log = RotatingLog(log_path, log_max)
    child: Optional[subprocess.Popen] = None
    reader: Optional[threading.Thread] = None
    code = 0
    try:
        child = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        assert child.stdout is not None
        reader = threading.Thread(target=_pump, args=(child.stdout, log), daemon=True)
        reader.start()
        code = child.wait()
        code = 128 - code if code < 0 else code
    except _Stop:
        code = 128 + signal.SIGTERM
    except OSError as exc:
        log.write(f"gpulint verify: cannot start the run: {exc}\n".encode())
        code = 127
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # cleaning up now; a second SIGTERM must not cut it short
        strays = proctree.end_descendants(os.getpid(), token, grace=1.0)
        if reader is not None:
            reader.join(timeout=5)  # the pipe closes once the last process holding it is gone
        if child is not None and child.stdout is not None:
            child.stdout.close()
        if strays:
            log.write(f"\n[gpulint verify: ended {strays} process(es) the run left behind]\n".encode())
        log.close()
    return code


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        sys.exit("usage: python -m gpulint.verify.supervise --log PATH [--log-max BYTES] -- COMMAND...")
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m gpulint.verify.supervise")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--log-max", type=int, default=8 << 20)
    options = parser.parse_args(argv[:cut])
    sys.exit(supervise(argv[cut + 1:], options.log, options.log_max))


if __name__ == "__main__":
    main()
