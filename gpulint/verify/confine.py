"""Kernel confinement for a verification run: a mount namespace where only the run's folders are writable.

    python -m gpulint.verify.confine --writable DIR [--writable DIR ...] [--protect DIR ...] -- COMMAND...

Where Linux lets an unprivileged user create user and mount namespaces (what `unshare -rm` does),
each run starts through this launcher: in a new mount namespace every mount of the file system
is remounted read-only, except the run's own folders (its sandbox, its temporary folder), the
user's cache folders (downloads and locks of torch hub, Hugging Face, Triton) and the kernel's
pseudo file systems (/dev, /dev/shm for DataLoader workers, /proc, /sys). A second, nested user
namespace then locks those read-only flags: a script running as root in its namespace cannot
remount anything writable. Every process of the run inherits this: shells, `python -I`
children, children with a cleared environment, native code. Nothing is written to the user's
folders, whatever the run does; a write fails with "Read-only file system".

Where the kernel refuses (user namespaces disabled, seccomp, not Linux), the Python-level
guard (guard.py) is the only confinement, as before; `probe` says why, and the report says
which confinement ran. No torch here, and no thread may start before `unshare`.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import subprocess
import sys
from functools import lru_cache
from typing import Optional, Sequence

from gpulint.records import dataclass

SWITCH_ENV = "GPULINT_VERIFY_NAMESPACE"  # "off": use the Python-level guard only
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
ST_RDONLY = 1
# flags a user namespace may not drop from a mount it inherited: kept on every remount
_KEPT_FLAGS = {b"nosuid": MS_NOSUID, b"nodev": MS_NODEV, b"noexec": MS_NOEXEC, b"noatime": MS_NOATIME,
               b"nodiratime": MS_NODIRATIME, b"relatime": MS_RELATIME, b"strictatime": MS_STRICTATIME}
PSEUDO = frozenset({b"proc", b"sysfs", b"devtmpfs", b"devpts", b"mqueue", b"cgroup", b"cgroup2", b"tracefs",
                    b"debugfs", b"securityfs", b"pstore", b"bpf", b"configfs", b"fusectl", b"hugetlbfs",
                    b"binfmt_misc", b"autofs", b"efivarfs"})
PSEUDO_ROOTS = (b"/dev", b"/proc", b"/sys")
EXIT_SETUP = 125  # the namespace could not be set up; the run never started
PROBE_TIMEOUT_S = 30


class ConfineError(OSError):
    """A step of the namespace set-up failed (the message names it)."""


@dataclass(frozen=True)
class Confinement:
    """Which confinement a run gets, in words the report can print."""

    namespace: bool
    writable: tuple[str, ...] = ()  # the run's own folders
    caches: tuple[str, ...] = ()  # the user's cache folders, writable too
    reason: str = ""  # why there is no namespace

    @property
    def kind(self) -> str:
        return "mount-namespace" if self.namespace else "python-guard"

    def describe(self) -> str:
        if self.namespace:
            caches = f" and your cache folders ({', '.join(self.caches)})" if self.caches else ""
            return ("a mount namespace: the whole file system was read-only for every process of the run (shells, "
                    f"native code and children included) except the run's sandbox, its temporary folder, /dev/shm"
                    f"{caches}")
        return (f"the Python-level guard only ({self.reason}): it refuses writes to your folders from the run's "
                "Python processes; programs that are not Python, and Python children started with -I or a "
                "cleared environment, are not confined")


def cache_folders() -> list[str]:
    """The user's cache folders that exist: downloads and lock files of torch hub, Hugging Face, Triton."""
    home = os.path.expanduser("~")
    candidates = [os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), os.path.join(home, ".triton"),
                  os.path.join(home, ".nv")]
    candidates += [os.environ[name] for name in ("HF_HOME", "TORCH_HOME", "TRITON_CACHE_DIR") if os.environ.get(name)]
    found: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def confinement(writable: Sequence[str], protect: Sequence[str]) -> Confinement:
    """The namespace when this machine allows it (and it makes `protect` read-only), else the guard only."""
    if os.environ.get(SWITCH_ENV, "").lower() in ("0", "off", "no", "false"):
        return Confinement(False, reason=f"{SWITCH_ENV}=off")
    own = tuple(os.path.realpath(w) for w in writable)
    caches = tuple(c for c in cache_folders() if c not in own)
    reason = probe(caches, tuple(os.path.realpath(p) for p in protect))
    if reason is not None:
        return Confinement(False, reason=reason)
    return Confinement(True, own, caches)


@lru_cache(maxsize=16)
def probe(writable: tuple[str, ...], protect: tuple[str, ...]) -> Optional[str]:
    """None when a namespace with these writable folders (and a temporary one, standing for a run's
    own) can be set up and leaves `protect` read-only; else why not, in a few words. Asked once per
    set of folders and process (one short process)."""
    if not sys.platform.startswith("linux"):
        return f"mount namespaces need Linux, not {sys.platform}"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpulint-probe-") as own:
        args = [sys.executable, "-m", "gpulint.verify.confine", "--probe", "--writable", own]
        for path in writable:
            args += ["--writable", path]
        for path in protect:
            args += ["--protect", path]
        try:
            done = subprocess.run(args + ["--", "true"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the namespace probe failed: {exc}"
    if done.returncode != 0:
        lines = (done.stderr or "").strip().splitlines()
        return lines[-1] if lines else f"the namespace probe ended with status {done.returncode}"
    return None


def command(confined: Confinement, protect: Sequence[str], inner: Sequence[str]) -> list[str]:
    """`inner` started through this launcher (or as it is, without a namespace)."""
    if not confined.namespace:
        return list(inner)
    args = [sys.executable, "-m", "gpulint.verify.confine"]
    for path in confined.writable + confined.caches:
        args += ["--writable", path]
    for path in protect:
        args += ["--protect", path]
    return args + ["--", *inner]


# --- inside the launcher ------------------------------------------------------------------------------

def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise ConfineError(errno, f"{what}: {os.strerror(errno)}")


def _enter(libc: ctypes.CDLL) -> None:
    """A new user and mount namespace in which this process is its own user (same uid and gid)."""
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unprivileged user namespaces are not available (unshare)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
            handle.write(text)


def _mount(libc: ctypes.CDLL, source: Optional[bytes], target: bytes, flags: int, what: str) -> None:
    _check(libc.mount(source, target, None, flags, None), f"{what} {os.fsdecode(target)}")


def _unescape(field: bytes) -> bytes:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as octal escapes."""
    for code, char in ((b"\\040", b" "), (b"\\011", b"\t"), (b"\\012", b"\n"), (b"\\134", b"\\")):
        field = field.replace(code, char)
    return field


def _mounts() -> list[tuple[bytes, bytes, bytes]]:
    """(mount point, its options, file system type) of every mount, from /proc/self/mountinfo."""
    found = []
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            head, _, tail = line.partition(b" - ")
            fields = head.split()
            if len(fields) >= 6 and tail:
                found.append((_unescape(fields[4]), fields[5], tail.split()[0]))
    return found


def _under(path: bytes, roots: Sequence[bytes]) -> bool:
    return any(path == root or path.startswith(root.rstrip(b"/") + b"/") for root in roots)


def confine(writable: Sequence[str], protect: Sequence[str]) -> None:
    """Turn this (single-threaded) process into a confined one: see the module docstring."""
    libc = _libc()
    keep = [os.fsencode(os.path.realpath(w)) for w in writable]
    _enter(libc)
    _mount(libc, None, b"/", MS_REC | MS_PRIVATE, "cannot make the mounts private:")
    for path in keep:  # their own mounts now: the read-only remounts below leave them writable
        _mount(libc, path, path, MS_BIND | MS_REC, "cannot bind")
    for point, options, kind in _mounts():
        if kind in PSEUDO or _under(point, PSEUDO_ROOTS) or _under(point, keep):
            continue
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for name in options.split(b","):
            flags |= _KEPT_FLAGS.get(name, 0)
        try:
            _mount(libc, None, point, flags, "cannot make read-only:")
        except ConfineError:
            if not os.path.exists(point):
                continue  # a mount point hidden under another mount
            raise
    _enter(libc)  # a nested namespace: the read-only flags are locked for everything the run starts
    for folder in protect:
        if os.path.exists(folder) and not os.statvfs(folder).f_flag & ST_RDONLY:
            raise ConfineError(0, f"{folder} is still writable in the namespace")
    for own in keep:
        if os.statvfs(own).f_flag & ST_RDONLY:
            raise ConfineError(0, f"{os.fsdecode(own)} is read-only in the namespace")
    os.chdir(os.getcwd())  # the working directory must be looked up again, through the new mounts


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpulint.verify.confine",
                                     usage="%(prog)s [--writable DIR]... [--protect DIR]... [--probe] -- COMMAND...")
    parser.add_argument("--writable", action="append", default=[], help="a folder the run may write")
    parser.add_argument("--protect", action="append", default=[], help="a folder that must end up read-only")
    parser.add_argument("--probe", action="store_true", help="set up, check, and exit")
    parser.add_argument("command", nargs="+", help="what to run, confined")
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        confine(options.writable, options.protect)
    except (ConfineError, OSError) as exc:
        prefix = "" if options.probe else "gpulint verify: cannot confine the run in a mount namespace: "
        print(prefix + str(exc.strerror or exc), file=sys.stderr)
        sys.exit(EXIT_SETUP)
    if options.probe:
        sys.exit(0)
    try:
        os.execvp(options.command[0], options.command)
    except OSError as exc:
        print(f"gpulint verify: cannot start {options.command[0]}: {exc}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main()
