"""Reading and writing user files without losing a byte: encoding, BOM, newlines, metadata.

What `fix` promises, and where it is enforced:

- only regular files are read, and never more than a bounded number of bytes (`read_bytes`):
  a FIFO, a device or a 10 GB file named `*.py` cannot hang or exhaust gpulint;
- the bytes written are the bytes read, with only the edited spans replaced: each span is
  encoded on its own, so a codec whose text does not round-trip (cp932's duplicate
  mappings) keeps every other byte; before any write, `encode_edited` checks that the text
  outside the edits is unchanged, that the bytes outside them are identical, and that the
  result decodes to exactly the fixed text, and refuses the fix otherwise;
- the file is replaced atomically by a temporary file that carries its owner, group, mode
  and extended attributes; when those cannot be carried over (someone else's file) or the
  file has several hard links, it is rewritten in place instead, so no name or attribute
  of it is lost;
- right before the replace (or the in-place write) the file is compared with what was
  read (device, inode, size, mtime_ns and content): a save by an editor in the meantime
  is never overwritten ("changed during fix, skipped");
- SIGINT/SIGTERM are held back during that last step, so an interrupted run never leaves
  a half-written file.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import itertools
import os
import re
import signal
import stat
import threading
import tokenize
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from gpulint.core.edits import Change, apply_changes, diff_changes
from gpulint.records import dataclass

BOM = b"\xef\xbb\xbf"
# The most gpulint ever reads of one file. Analysis stops far earlier (`max-file-size`);
# this only keeps a huge file that no rule could match from being read into memory whole.
READ_LIMIT = 64 * 1024 * 1024
TEMP_SUFFIX = ".gpulint-tmp"
_NAME_BYTES = 96  # of the original name kept in a temporary file's name (255-byte limit)
CHANGED = "file changed during fix, skipped (not written)"


class SourceError(Exception):
    """A file that cannot be read, decoded or written; the message is shown to the user as is."""


class FixRefused(SourceError):
    """A fix that would change bytes outside its edits; it is never written."""


@dataclass(frozen=True)
class FileIdentity:
    """What a file was when gpulint read it; any difference before writing means it changed."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> "FileIdentity":
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class SourceFile:
    path: Path
    raw: bytes
    text: str  # decoded, without the BOM
    encoding: str  # codec used for the text, never "utf-8-sig"
    bom: bool
    identity: Optional[FileIdentity] = None  # None: not read from a file (stdin)

    def encode(self, text: str) -> bytes:
        """The whole text encoded as the file was (for new files; fixes use `encode_edited`)."""
        data = text.encode(self.encoding)
        return BOM + data if self.bom else data

    @property
    def body(self) -> bytes:
        return self.raw[len(BOM):] if self.bom else self.raw

    def encode_edited(self, new_text: str, changes: Optional[Sequence[Change]] = None) -> bytes:
        """The file's bytes with only `changes` replaced, checked before anyone writes them.

        `changes` (offsets in `self.text`) must turn the text read into `new_text`; without
        them, the changed lines are found by a diff. Raises FixRefused when the text or the
        bytes outside the changes would differ, or the result would not decode to `new_text`.
        """
        if new_text == self.text:
            return self.raw
        ordered = sorted(diff_changes(self.text, new_text) if changes is None else changes,
                         key=lambda c: (c.start, c.end))
        cursor = 0
        for change in ordered:
            if change.start < cursor or change.end > len(self.text) or change.end < change.start:
                raise FixRefused("the fix's edits overlap or lie outside the file; not written")
            cursor = change.end
        if apply_changes(self.text, ordered) != new_text:
            raise FixRefused("the fix would change text outside its edits; not written")
        body = self.body
        bounds = _byte_offsets(body, self.text, self.encoding, sorted({o for c in ordered for o in (c.start, c.end)}))
        pieces: list[bytes] = [BOM] if self.bom else []
        kept: list[tuple[int, int, int]] = []  # (original byte offset, new byte offset, length)
        position = written = 0
        for change in ordered:
            start, end = bounds[change.start], bounds[change.end]
            pieces.append(body[position:start])
            kept.append((position, written, start - position))
            written += start - position
            try:
                encoded = change.text.encode(self.encoding)
            except UnicodeEncodeError as exc:
                raise FixRefused(f"the fix needs {exc.object[exc.start:exc.end]!r}, which {self.encoding} "
                                 "cannot encode; not written") from None
            pieces.append(encoded)
            written += len(encoded)
            position = end
        pieces.append(body[position:])
        kept.append((position, written, len(body) - position))
        data = b"".join(pieces)
        new_body = data[len(BOM):] if self.bom else data
        # the invariant, checked on the result itself: every byte outside the edits is the
        # byte that was read, and the bytes decode to exactly the fixed text
        if any(body[old:old + n] != new_body[new:new + n] for old, new, n in kept):
            raise FixRefused("the fix would change bytes outside its edits; not written")
        try:
            decoded = new_body.decode(self.encoding)
        except UnicodeDecodeError:
            decoded = None
        if decoded != new_text:
            raise FixRefused(f"the fix cannot be written in this file's encoding ({self.encoding}) without "
                             "changing bytes outside its edits; not written")
        return data


def _byte_offsets(body: bytes, text: str, encoding: str, offsets: Sequence[int]) -> dict[int, int]:
    """Byte offset in `body` of each character offset of `text` (sorted offsets)."""
    out: dict[int, int] = {}
    name = codecs.lookup(encoding).name
    if name in ("utf-8", "ascii", "latin-1", "iso8859-1"):  # one encoding per character: exact
        position = previous = 0
        for offset in offsets:
            position += len(text[previous:offset].encode(name))
            out[offset] = position
            previous = offset
        return out
    factory = codecs.getincrementaldecoder(encoding)

    def chars_in(n: int) -> int:
        try:
            return len(factory().decode(body[:n], final=False))
        except UnicodeDecodeError:
            return -1

    for offset in offsets:  # the first byte count that decodes to `offset` characters
        low, high = 0, len(body)
        while low < high:
            middle = (low + high) // 2
            if chars_in(middle) >= offset:
                high = middle
            else:
                low = middle + 1
        out[offset] = low
    return out


_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?")
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)  # PEP 263


def _first_lines(raw: bytes) -> Callable[[], bytes]:
    """readline for `tokenize.detect_encoding` that, like CPython, also ends lines at a lone CR
    (`io.BytesIO.readline` does not: a CR-only file's coding cookie went unseen)."""
    lines = iter(match.group() for match in itertools.islice(_LINE.finditer(raw), 3) if match.group())
    return lambda: next(lines, b"")


def decode_source(raw: bytes, path: Path, identity: Optional[FileIdentity] = None) -> SourceFile:
    bom = raw.startswith(BOM)
    body = raw[len(BOM):] if bom else raw
    if b"\x00" in body:
        raise SourceError("file is binary (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(_first_lines(raw))
    except SyntaxError as exc:
        cookie = _COOKIE.search(b"".join(match.group() for match in itertools.islice(_LINE.finditer(body), 2)))
        if bom and cookie is not None:  # CPython refuses this file too ("encoding problem: utf-8")
            declared = cookie.group(1).decode("ascii", "replace")
            raise SourceError(f"the file starts with a UTF-8 byte order mark but its coding declaration says "
                              f"{declared!r}; Python refuses such a file: remove one of them") from None
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
    return SourceFile(path=path, raw=raw, text=text, encoding=encoding, bom=bom, identity=identity)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def unreadable_reason(path: Path) -> Optional[str]:
    """Why `path` is not a regular file gpulint can read ("no such file", "not a regular file
    (a FIFO)"), or None when it is one. For messages: `read_bytes` still checks on the open file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a link to a file that does not exist" if os.path.islink(path) else "no such file"
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    return f"not a regular file ({kind})"


def read_bytes(path: Path, limit: int = READ_LIMIT) -> tuple[bytes, FileIdentity]:
    """A regular file's bytes, at most `limit` of them; never blocks on a FIFO or a device.

    The type is checked before opening (opening some devices has side effects) and again
    on the open descriptor (the path may have been swapped in between).
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SourceError("not a regular file")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SourceError("not a regular file")
            if st.st_size > limit:
                raise SourceError(_too_large(st.st_size, limit))
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:  # it grew while being read
                    raise SourceError(_too_large(size, limit))
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise SourceError("file vanished before it could be read") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return b"".join(chunks), FileIdentity.of(st)


def _too_large(size: int, limit: int) -> str:
    return (f"file is too large to read ({size / 2**20:.1f} MB; gpulint reads files up to "
            f"{limit / 2**20:.0f} MB, see max-file-size)")


def read_source(path: Path, limit: int = READ_LIMIT) -> SourceFile:
    raw, identity = read_bytes(path, limit)
    return decode_source(raw, path, identity)


# ---------------------------------------------------------------------------------------------
# writing

@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back while a file is being replaced or rewritten."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def write_atomic(source: SourceFile, new_text: str, changes: Optional[Sequence[Change]] = None) -> bytes:
    """Write `new_text` over the file, only if it is still what was read; returns the bytes written.

    Only the edited spans change (see `SourceFile.encode_edited`); a failure at any point
    leaves the original byte-identical.
    """
    data = source.encode_edited(new_text, changes)
    write_bytes(source, data)
    return data


class _KeepInPlace(Exception):
    """A replacement file could not carry the original's metadata: write in place instead."""


def write_bytes(source: SourceFile, data: bytes) -> None:
    # Write through symlinks to their target, never replace the link itself.
    path = Path(os.path.realpath(source.path))
    st = _stat_before_write(path, "cannot write")
    if not os.access(path, os.W_OK) or not (st.st_mode & stat.S_IWUSR):
        raise SourceError("file is read-only; fix not written")
    _check_unchanged(path, source)
    if st.st_nlink > 1:  # a new inode would leave the other names with the old content
        _write_in_place(path, source, data)
        return
    try:
        tmp = _temporary_copy(path, data, st)
    except _KeepInPlace:
        _write_in_place(path, source, data)
        return
    try:
        with signals_deferred():
            _check_unchanged(path, source)
            os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise SourceError(f"cannot write: {exc.strerror or exc}") from None
        raise


def _temporary_copy(path: Path, data: bytes, st: os.stat_result) -> str:
    """A temporary file beside `path` holding `data` with `path`'s owner, group, mode and xattrs."""
    name = path.name
    while len(os.fsencode(name)) > _NAME_BYTES:
        name = name[:-1]
    try:
        import tempfile  # (not on import: a run that writes nothing never loads it)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    except PermissionError:  # a directory we may not write to, holding a file we may: write in place
        raise _KeepInPlace() from None
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}; fix not written") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            if hasattr(os, "chown"):
                os.chown(tmp, st.st_uid, st.st_gid)  # before chmod: chown may clear set-id bits
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            _copy_xattrs(str(path), tmp)
        except PermissionError:
            raise _KeepInPlace() from None
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise SourceError(f"cannot write: {exc.strerror or exc}") from None
        raise
    return tmp


def _copy_xattrs(source: str, target: str) -> None:
    """Make `target`'s extended attributes (ACLs, labels, user data) those of `source`."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)):
            return
        raise
    try:
        for name in names:
            os.setxattr(target, name, os.getxattr(source, name))
        for name in set(os.listxattr(target)) - set(names):
            os.removexattr(target, name)
    except OSError as exc:
        if isinstance(exc, PermissionError) or exc.errno in (errno.EPERM, errno.EACCES, errno.ENOTSUP):
            raise _KeepInPlace() from None
        raise


def _stat_before_write(path: Path, failing: str) -> os.stat_result:
    """Stat the file about to be written; a vanished or unreadable one is a SourceError, not a traceback."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise SourceError("file vanished before the fix could be written") from None
    except OSError as exc:
        raise SourceError(f"{failing}: {exc.strerror or exc}") from None


def _check_unchanged(path: Path, source: SourceFile) -> None:
    """Raise unless `path` still is what was read: same file, size, mtime and content."""
    if source.identity is not None:
        st = _stat_before_write(path, "cannot re-read before writing")
        if FileIdentity.of(st) != source.identity:
            raise SourceError(CHANGED)
    try:
        current, _ = read_bytes(path, max(READ_LIMIT, len(source.raw)))
    except SourceError as exc:
        if "vanished" in str(exc):
            raise
        raise SourceError(f"cannot re-read before writing: {exc}") from None
    if current != source.raw:
        raise SourceError(CHANGED)


def _write_in_place(path: Path, source: SourceFile, data: bytes) -> None:
    """Rewrite the file's own inode: every hard link, the owner and the xattrs stay as they are.

    Space is reserved first, so a full disk fails before the first byte changes; if a write
    fails anyway, the original bytes are put back.
    """
    with signals_deferred():
        try:
            fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise SourceError(f"cannot write: {exc.strerror or exc}; fix not written") from None
        try:
            st = os.fstat(fd)
            if source.identity is not None and (st.st_dev, st.st_ino) != (source.identity.device,
                                                                        source.identity.inode):
                raise SourceError(CHANGED)
            _check_unchanged(path, source)
            if len(data) > st.st_size and hasattr(os, "posix_fallocate"):
                try:
                    os.posix_fallocate(fd, 0, len(data))
                except OSError as exc:
                    if exc.errno not in (errno.EINVAL, errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)):
                        os.ftruncate(fd, st.st_size)
                        raise SourceError(f"cannot write: {exc.strerror or exc}; fix not written") from None
            try:
                _write_all(fd, data)
                os.ftruncate(fd, len(data))
                os.fsync(fd)
            except OSError as exc:
                try:
                    _write_all(fd, source.raw)
                    os.ftruncate(fd, len(source.raw))
                    os.fsync(fd)
                except OSError:
                    raise SourceError(f"cannot write: {exc.strerror or exc}; the file could not be restored: its "
                                      f"original content is saved in {_rescue(source)}") from None
                raise SourceError(f"cannot write: {exc.strerror or exc}; fix not written") from None
        finally:
            os.close(fd)


def _rescue(source: SourceFile) -> str:
    """Save the bytes read to a temporary file when the original cannot be restored in place."""
    try:
        import tempfile  # (not on import: a run that writes nothing never loads it)
        fd, rescued = tempfile.mkstemp(prefix="gpulint-rescued-", suffix=f"-{source.path.name[-80:]}")
        with os.fdopen(fd, "wb") as handle:
            handle.write(source.raw)
        return rescued
    except OSError:
        return "(nowhere: the temporary directory is not writable either)"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)


# ---------------------------------------------------------------------------------------------
# reports gpulint is asked to write (`verify --json/--plot`)

class OutputRefused(OSError):
    """A report path gpulint will not write through (a link, a file with several names, a FIFO)."""


def output_refusal(path: Path) -> Optional[str]:
    """Why a report must not be written at `path`, or None: a symbolic link or a file with other
    names (a hard link) could be the script or a module of the user's; a FIFO or a device is no file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(st.st_mode):
        return (f"is a symbolic link (to {os.readlink(path)}); a report is never written through a link, "
                "which could name one of your files")
    if not stat.S_ISREG(st.st_mode):
        return unreadable_reason(path)
    if st.st_nlink > 1:
        return (f"has {st.st_nlink} names (hard links); a report is never written over a file that is also "
                "somewhere else")
    return None


def write_output(path: Path, data: bytes) -> None:
    """Write a report at `path`: never through a link (O_NOFOLLOW), never over a file with several
    names or one that is not regular (checked on the open file, so a swap after the check is
    caught too), never blocking on a FIFO. Raises OutputRefused."""
    flags = (os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        reason = output_refusal(path) if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EMLINK) else None
        raise OutputRefused(f"{path}: {reason or exc.strerror or exc}; not written") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise OutputRefused(f"{path}: {output_refusal(path) or 'not a regular file'}; not written")
        os.ftruncate(fd, 0)
        _write_all(fd, data)
    finally:
        os.close(fd)

