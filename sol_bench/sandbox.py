"""Confinement of candidate processes.

Writes: Landlock (Linux >= 5.13, unprivileged) limits every write of the candidate's process and its
descendants to its staging directory, ``/dev/shm`` (shared tensors) and opening device files (the GPU).
Reads stay open: nothing secret is on disk. From Landlock ABI 4 the candidate gets no TCP, from ABI 6 it
cannot signal processes outside its domain (the judge), and Landlock always forbids ptrace of processes
outside the domain. Where Landlock is missing the judge still runs and records ``sandbox: none``; the
problem-directory integrity check then remains as a detector.

Processes: a candidate runs in its own session; ``kill_tree`` ends the session and every process that
escaped it but is still a descendant.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import signal
import struct
from dataclasses import dataclass
from pathlib import Path

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # same numbers on x86_64 and aarch64
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = (1 << i for i in range(6, 13))
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel, 0 when unavailable."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(ctypes.c_long(_SYS_CREATE), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(v) if v > 0 else 0


@dataclass(frozen=True)
class SandboxPolicy:
    writable: tuple[Path, ...]  # full write access beneath these
    device_dirs: tuple[Path, ...] = (Path("/dev"), Path("/proc"))  # may open existing files for writing
    deny_tcp: bool = True
    scope_signals: bool = True


def apply(policy: SandboxPolicy) -> str:
    """Confine the calling process (and all it starts later). Returns a description for the trace.

    Call before any thread is started: Landlock binds the calling thread and its future children.
    """
    abi = landlock_abi()
    if abi < 1:
        return "none (Landlock unavailable)"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    write_all = (
        _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO
        | _MAKE_BLOCK | _MAKE_SYM
    )  # fmt: skip
    if abi >= 2:
        write_all |= _REFER
    if abi >= 3:
        write_all |= _TRUNCATE
    dev_access = _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if (policy.deny_tcp and abi >= 4) else 0
    scoped = (_SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX) if (policy.scope_signals and abi >= 6) else 0
    if abi >= 6:
        attr = struct.pack("QQQ", write_all, net, scoped)
    elif abi >= 4:
        attr = struct.pack("QQ", write_all, net)
    else:
        attr = struct.pack("Q", write_all)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(ctypes.c_long(_SYS_CREATE), buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path, access in [*((p, write_all) for p in policy.writable), *((p, dev_access) for p in policy.device_dirs)]:
            if not Path(path).exists():
                continue
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", access, pfd)
                rbuf = ctypes.create_string_buffer(rule, len(rule))
                r = libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(1), rbuf, ctypes.c_uint32(0))
                if r < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
        if libc.syscall(ctypes.c_long(_SYS_RESTRICT), ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    extras = [x for x, on in (("no-tcp", net), ("scoped-signals", scoped)) if on]
    if drop_capabilities():
        extras.append("no-caps")
    return f"landlock-abi{abi}" + ("+" + "+".join(extras) if extras else "")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> bool:
    """Give up every capability (matters when the judge runs as root): without CAP_SYS_PTRACE and
    CAP_DAC_* the candidate cannot read /proc/<judge>/environ or other processes' memory. True on success."""
    if platform.system() != "Linux":
        return False
    libc = _libc()
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; fails harmlessly past the last capability
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    return libc.syscall(ctypes.c_long(126 if platform.machine() == "x86_64" else 91), ctypes.byref(header), ctypes.byref(data)) == 0


# ------------------------------------------------------------------------------------------ processes


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, session id) of a process, or None if it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[3])


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(root: int) -> set[int]:
    """Every live descendant of ``root`` (by parent links)."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st:
            children.setdefault(st[0], []).append(pid)
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def session_members(sid: int) -> set[int]:
    out = set()
    for pid in _all_pids():
        st = _stat(pid)
        if st and st[1] == sid:
            out.add(pid)
    return out


def thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def become_subreaper() -> None:
    """Orphans of our candidates re-parent to us instead of init, so ``kill_tree`` can find them."""
    if platform.system() == "Linux":
        _libc().prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def kill_tree(pid: int, own_children_before: set[int] | None = None, rounds: int = 5) -> int:
    """SIGKILL the candidate's session, its descendants and orphans re-parented to us. Returns the count.

    Scans again until a scan finds nothing alive: a process may fork between a scan and its kill.
    """
    import time

    killed: set[int] = set()
    for _ in range(rounds):
        victims = {pid} | descendants(pid) | session_members(pid)
        if own_children_before is not None:
            me = os.getpid()
            victims |= {c for c in descendants(me) if c not in own_children_before}
        victims.discard(os.getpid())
        alive = {v for v in victims if _stat(v) is not None and not _is_zombie(v)}
        if not alive:
            break
        for v in alive:
            try:
                os.kill(v, signal.SIGKILL)
                killed.add(v)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    me = os.getpid()
    for v in killed - {pid}:  # orphans re-parented to us: reap them (the worker itself is its Popen's to reap)
        st = _stat(v)
        if st is not None and st[0] == me:
            try:
                os.waitpid(v, os.WNOHANG)
            except ChildProcessError:
                pass
    return len(killed)


def _is_zombie(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return data[data.rindex(")") + 2] == "Z"
