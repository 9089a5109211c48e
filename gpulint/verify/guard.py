"""Keep a verification run's writes inside its sandbox: an audit hook in every Python process of the run.

The run's working directory and the script's folder are sandbox mirrors (see sandbox.py):
small files are copies, large ones and deep folders are symbolic links to the user's files.
This hook makes the links copy-on-write, the way an overlay file system would: before the
run writes to, truncates, chmods or deletes *through* a link that leaves the sandbox, the
link is replaced by a copy (a file) or by a real folder of links (a folder). Writes to the
user's protected folders by absolute path are refused with PermissionError.

Python's audit hooks see every `open`, `os.remove`, `os.rename`, `shutil.rmtree`, ... made by
Python code, in the harness and, through `_site/sitecustomize.py`, in every Python process the
run starts (DataLoader workers, `subprocess` children). Native code that writes by itself
(`torch.save` is wrapped by the harness; an HDF5 library is not) and other programs (`rm` in
a shell) are confined only by the sandbox layout: their relative paths land in the sandbox.
No torch here: this module is imported at start-up of every Python process of the run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import threading
from typing import Any, Callable, Optional, Union

ENV = "GPULINT_VERIFY_GUARD"
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
DEFAULT_EXEMPT = ("/dev", "/proc", "/sys")
COPY_UP_MAX = 4 << 30  # a run that appends to a larger linked file is refused instead of copying it
MAX_LINK_HOPS = 40

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]", int, None]

_installed: Optional["Guard"] = None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class Guard:
    """Decides, before each file-system change a run makes, whether it stays in the sandbox.

    `writable` set: the run is in a read-only mount namespace (confine.py) where only the
    sandboxes and these folders can be written; the guard refuses anything else up front, with
    its own message, so the refusal is reported (the kernel would refuse it anyway). Without it,
    writes outside the sandboxes and the protected folders are allowed and listed in `outside`.
    `log`: a file every process of the run appends its refusals to (DataLoader workers and child
    processes included), read by the parent after the run.
    """

    def __init__(self, sandboxes: list[str], protected: list[str], exempt: tuple[str, ...] = DEFAULT_EXEMPT,
                 copy_up_max: int = COPY_UP_MAX, writable: Optional[list[str]] = None,
                 log: Optional[str] = None) -> None:
        self.sandboxes = [os.path.realpath(s) for s in sandboxes]
        self.protected = [os.path.realpath(p) for p in protected]
        self.exempt = tuple(os.path.realpath(p) for p in exempt)
        self.writable = None if writable is None else [os.path.realpath(w) for w in writable]
        self.log = log
        self.copy_up_max = copy_up_max
        self.blocked: list[str] = []  # "verb path" of refused operations, for the report
        self.copied: list[str] = []  # sandbox paths that were copied on write
        self.outside: list[str] = []  # "verb path" of writes allowed outside your folders and the sandbox
        self._busy = threading.local()
        self._handlers: dict[str, Callable[[tuple], None]] = {
            "open": self._on_open,
            "os.remove": lambda a: self.entry(a[0], a[1], "delete"),
            "os.rmdir": lambda a: self.entry(a[0], a[1], "delete"),
            "os.rename": self._on_rename,
            "os.mkdir": lambda a: self.entry(a[0], a[2] if len(a) > 2 else None, "create a folder in"),
            "os.mkfifo": lambda a: self.entry(a[0], a[-1], "create"),
            "os.mknod": lambda a: self.entry(a[0], a[-1], "create"),
            "os.link": self._on_link,
            "os.symlink": lambda a: self.entry(a[1], a[2] if len(a) > 2 else None, "create a link at"),
            "os.truncate": lambda a: self.follow(a[0], None, keep=True, verb="truncate"),
            "os.chmod": lambda a: self.follow(a[0], a[2] if len(a) > 2 else None, keep=True, verb="change"),
            "os.chown": lambda a: self.follow(a[0], a[3] if len(a) > 3 else None, keep=True, verb="change"),
            "os.utime": lambda a: self.follow(a[0], a[3] if len(a) > 3 else None, keep=True, verb="change"),
            "os.setxattr": lambda a: self.follow(a[0], None, keep=True, verb="change"),
            "os.removexattr": lambda a: self.follow(a[0], None, keep=True, verb="change"),
            "shutil.rmtree": lambda a: self.follow(a[0], a[1] if len(a) > 1 else None, keep=True, verb="delete"),
            "os.chdir": self._on_chdir,
        }

    # --- the hook ---------------------------------------------------------------------------------
    def __call__(self, event: str, args: tuple) -> None:
        handler = self._handlers.get(event)
        if handler is None or getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            handler(args)
        finally:
            self._busy.on = False

    def _on_open(self, args: tuple) -> None:
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(flags, int):
            if not flags & WRITE_FLAGS:
                return
            keep = not flags & os.O_TRUNC
        elif isinstance(mode, str):
            if not any(c in mode for c in "wax+"):
                return
            keep = "w" not in mode
        else:
            return
        self.follow(path, None, keep=keep, verb="write to")

    def _on_link(self, args: tuple) -> None:
        """A hard link is the same file under a second name: one in the sandbox to a file of yours
        would let a later write reach your file without passing through any check."""
        self.entry(args[1], args[3] if len(args) > 3 else None, "create a link at")
        source = _as_path(args[0])
        if source is None:
            return
        parent, name = self._walk(self._absolute(source, args[2] if len(args) > 2 else None))
        full = os.path.realpath(os.path.join(parent, name) if name else parent)
        if not self._in_sandbox(full):
            self._deny(full, "link to", reason="a second name for a file outside the sandbox")

    def _on_rename(self, args: tuple) -> None:
        self.entry(args[0], args[2] if len(args) > 2 else None, "move")
        self.entry(args[1], args[3] if len(args) > 3 else None, "replace")

    def _on_chdir(self, args: tuple) -> None:
        """A run that changes into a linked folder must land in the sandbox, not in the user's folder."""
        path = _as_path(args[0])
        if path is None:
            return
        parent, name = self._walk(self._absolute(path, None))
        full = os.path.join(parent, name) if name else parent
        if self._in_sandbox(full) and os.path.islink(full) and self._escapes(full):
            self._materialize(full)

    # --- decisions ----------------------------------------------------------------------------
    def entry(self, path: PathArg, dir_fd: Optional[int], verb: str) -> None:
        """An operation on a directory entry itself (delete, rename, create): allowed inside the sandbox."""
        text = _as_path(path)
        if text is None:
            return
        parent, name = self._walk(self._absolute(text, dir_fd))
        full = os.path.join(parent, name) if name else parent
        if self._in_sandbox(full):
            return
        if self._protected(full):
            self._deny(full, verb)
        self._elsewhere(os.path.join(os.path.realpath(parent), name) if name else os.path.realpath(parent), verb)

    def follow(self, path: PathArg, dir_fd: Optional[int], keep: bool, verb: str) -> None:
        """An operation through the entry on what it names (write, truncate, chmod): copy-on-write for links."""
        text = _fd_path(path) if isinstance(path, int) and verb != "write to" else _as_path(path)
        if text is None:
            return  # (a file descriptor opened for writing was checked when it was opened)
        parent, name = self._walk(self._absolute(text, dir_fd))
        full = os.path.join(parent, name) if name else parent
        if self._in_sandbox(full):
            if os.path.islink(full) and self._escapes(full):
                if os.path.isdir(full):
                    self._materialize(full)
                else:
                    self._copy_up(full, keep, verb)
            return
        real = os.path.realpath(full)
        if self._in_sandbox(real):
            return
        if self._protected(full) or self._protected(real):
            self._deny(full, verb)
        self._elsewhere(real, verb)

    def _elsewhere(self, real: str, verb: str) -> None:
        """A change outside the sandbox and your folders: refused in a read-only namespace, else listed."""
        if any(_inside(real, root) for root in self.exempt):
            return
        if os.path.basename(os.path.dirname(real)) == "__pycache__":
            return  # Python's own bytecode cache: where it cannot write, importlib goes on without it
        if self.writable is None:
            self._record("outside", f"{verb} {real}")
        elif not any(_inside(real, root) for root in self.writable):
            self._deny(real, verb, reason="everything but the sandbox is read-only in this run")

    def check_write(self, path: PathArg, keep: bool = False) -> None:
        """For writers the audit hook cannot see (torch.save writes from C++, os.open with dir_fd)."""
        if getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            self.follow(path, None, keep=keep, verb="write to")
        finally:
            self._busy.on = False

    # --- helpers ------------------------------------------------------------------------------
    def _protected(self, path: str) -> bool:
        if any(_inside(path, root) for root in self.exempt):
            return False
        return any(_inside(path, root) for root in self.protected)

    def _in_sandbox(self, path: str) -> bool:
        return any(_inside(path, root) for root in self.sandboxes)

    def _escapes(self, link: str) -> bool:
        return not self._in_sandbox(os.path.realpath(link))

    @staticmethod
    def _absolute(path: str, dir_fd: Optional[int]) -> str:
        if os.path.isabs(path):
            return path
        if dir_fd is not None and dir_fd >= 0:
            try:
                return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
            except OSError:
                pass
        return os.path.join(os.getcwd(), path)

    def _walk(self, path: str) -> tuple[str, str]:
        """Resolve every component but the last as the kernel would, making sandbox links on the way real."""
        parts = [c for c in path.split("/") if c]
        name = parts.pop() if parts else ""
        stack = list(reversed(parts))
        current = "/"
        hops = 0
        while stack:
            component = stack.pop()
            if component in ("", "."):
                continue
            if component == "..":
                current = os.path.dirname(current) or "/"
                continue
            candidate = os.path.join(current, component)
            if os.path.islink(candidate):
                if self._in_sandbox(candidate) and self._escapes(candidate):
                    self._materialize(candidate)
                    current = candidate
                    continue
                hops += 1
                if hops > MAX_LINK_HOPS:
                    return os.path.realpath(os.path.join(candidate, *reversed(stack))), name
                try:
                    target = os.readlink(candidate)
                except OSError:
                    current = candidate
                    continue
                if target.startswith("/"):
                    current = "/"
                stack.extend(reversed([c for c in target.split("/") if c]))
                continue
            current = candidate
        return current, name

    def _materialize(self, link: str) -> None:
        """Replace a link to a folder outside the sandbox by a real folder of links to its entries."""
        target = os.path.realpath(link)
        if not os.path.isdir(target):
            return
        try:
            entries = os.listdir(target)
        except OSError:
            entries = []
        try:
            os.unlink(link)
            os.mkdir(link)
        except FileExistsError:
            return  # another process of the run did it first
        except OSError:
            return
        for entry in entries:
            try:
                os.symlink(os.path.join(target, entry), os.path.join(link, entry))
            except OSError:
                pass

    def _copy_up(self, link: str, keep: bool, verb: str) -> None:
        """Replace a link to a file outside the sandbox by a copy (or an empty file for a truncating write)."""
        target = os.path.realpath(link)
        scratch = f"{link}.gpulint-copy-{os.getpid()}"
        try:
            if keep and os.path.isfile(target):
                if os.path.getsize(target) > self.copy_up_max:
                    self._deny(link, f"{verb} (the file is too large to copy into the sandbox)")
                shutil.copyfile(target, scratch)
                shutil.copymode(target, scratch)
            else:
                with open(scratch, "wb"):
                    pass
            os.replace(scratch, link)
        except PermissionError:
            raise
        except OSError:
            try:
                os.unlink(scratch)
            except OSError:
                pass
            return
        self._record("copied", link)

    def _record(self, kind: str, entry: str) -> None:
        """Keep `entry` for the report, in this process and in the run's shared log."""
        (self.blocked if kind == "blocked" else self.outside if kind == "outside" else self.copied).append(entry)
        if not self.log:
            return
        try:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                os.write(fd, (json.dumps({"kind": kind, "entry": entry, "pid": os.getpid()}) + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def _deny(self, path: str, verb: str, reason: str = "") -> None:
        self._record("blocked", f"{verb} {path}")
        why = reason or "verify never changes your files"
        raise PermissionError(
            errno.EACCES,
            f"gpulint verify blocked this run from trying to {verb} a file of yours ({why}; write relative to "
            "the working directory, which is a sandbox)", path,
        )


def _fd_path(fd: int) -> Optional[str]:
    """What an open file descriptor names (os.fchmod, os.fchown, os.truncate on a descriptor)."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return target if target.startswith("/") else None  # pipes, sockets, anonymous files: not a path


def _as_path(path: Any) -> Optional[str]:
    if isinstance(path, int) or path is None:
        return None  # a file descriptor: its open() was checked
    try:
        return os.fsdecode(os.fspath(path))
    except TypeError:
        return None


def install(guard: Guard) -> Guard:
    """Audit hooks cannot be removed: one guard per process, installed once."""
    global _installed
    if _installed is None:
        sys.addaudithook(guard)
        _installed = guard
    return _installed


def installed() -> Optional[Guard]:
    return _installed


def config_json(sandboxes: list[str], protected: list[str], writable: Optional[list[str]] = None,
                log: Optional[str] = None) -> str:
    return json.dumps({"sandboxes": sandboxes, "protected": protected, "writable": writable, "log": log})


def install_from_env() -> Optional[Guard]:
    raw = os.environ.get(ENV)
    if not raw:
        return None
    try:
        config = json.loads(raw)
        guard = Guard(list(config["sandboxes"]), list(config["protected"]), writable=config.get("writable"),
                      log=config.get("log"))
    except (ValueError, KeyError, TypeError):
        return None
    _guard_dir_fd_opens(guard)
    return install(guard)


def _guard_dir_fd_opens(guard: Guard) -> None:
    """`os.open(name, flags, dir_fd=fd)`: the "open" audit event does not carry `dir_fd`, so the hook
    would resolve `name` against the working directory. os.open checks it here first."""
    import posix

    real_open = posix.open
    if getattr(real_open, "_gpulint_guarded", False):
        return

    def open_(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Optional[int] = None) -> int:
        if dir_fd is not None and flags & WRITE_FLAGS:
            guard.check_write(os.path.join(_fd_path(dir_fd) or "", os.fsdecode(path)), keep=not flags & os.O_TRUNC)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    open_._gpulint_guarded = True  # type: ignore[attr-defined]
    os.open = posix.open = open_


# Written into each verification's work folder and put first on the run's PYTHONPATH, so that
# every Python process of the run (DataLoader workers started with "spawn", subprocess children)
# installs the guard at start-up. Python imports only the first `sitecustomize` it finds: this
# one then runs the next one on sys.path, if any, as if it had been found directly.
SITECUSTOMIZE = '''"""gpulint verify: install the write guard in this Python process (see gpulint/verify/guard.py)."""
import os
import sys


def _gpulint_verify_guard():
    if os.environ.get("GPULINT_VERIFY_GUARD"):
        try:
            from gpulint.verify import guard
        except ImportError:
            return
        guard.install_from_env()


def _gpulint_verify_chain():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_gpulint_verify_guard()
_gpulint_verify_chain()
'''


def write_site_folder(folder: "os.PathLike[str]") -> str:
    """The folder to put first on PYTHONPATH of a run; returns its path."""
    path = os.fspath(folder)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "sitecustomize.py"), "w", encoding="utf-8") as handle:
        handle.write(SITECUSTOMIZE)
    return path
