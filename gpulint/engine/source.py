"""Reading and writing user files without losing a byte: encoding, BOM, newlines, mode."""

from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

BOM = b"\xef\xbb\xbf"


class SourceError(Exception):
    """A file that cannot be read or decoded; the message is shown to the user as is."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    raw: bytes
    text: str  # decoded, without the BOM
    encoding: str  # codec used for the text, never "utf-8-sig"
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return BOM + data if self.bom else data


def decode_source(raw: bytes, path: Path) -> SourceFile:
    bom = raw.startswith(BOM)
    body = raw[len(BOM):] if bom else raw
    if b"\x00" in body:
        raise SourceError("file is binary (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as decode_exc:
            raise SourceError(
                f"cannot decode as utf-8 at byte {decode_exc.start}: {decode_exc.reason}"
            ) from None
        raise SourceError(f"cannot determine encoding: {exc}") from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"cannot decode as {encoding} at byte {exc.start}: {exc.reason}"
        ) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None
    return SourceFile(path=path, raw=raw, text=text, encoding=encoding, bom=bom)


def read_source(path: Path) -> SourceFile:
    try:
        # a FIFO or device named *.py would block or never end: read regular files only
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SourceError("not a regular file")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SourceError("file vanished before it could be read") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode_source(raw, path)


def write_atomic(source: SourceFile, new_text: str) -> None:
    """Replace the file's content with `new_text`, only if it is still what we read.

    Writes a temporary file beside the original and renames it over, so a failure at
    any point leaves the original byte-identical. The file mode is kept.
    """
    # Write through symlinks to their target, never replace the link itself.
    path = Path(os.path.realpath(source.path))
    data = source.encode(new_text)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SourceError("file vanished before the fix could be written") from None
    if not os.access(path, os.W_OK) or not (st.st_mode & stat.S_IWUSR):
        raise SourceError("file is read-only; fix not written")
    try:
        current = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot re-read before writing: {exc.strerror or exc}") from None
    if current != source.raw:
        raise SourceError("file changed while gpulint was fixing it; fix not written")
    directory = path.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".gpulint-tmp", dir=directory)
    except OSError as exc:  # e.g. a read-only directory
        raise SourceError(f"cannot write: {exc.strerror or exc}; fix not written") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise SourceError(f"cannot write: {exc.strerror or exc}") from None
        raise
