"""The sandbox's seccomp filter: a classic BPF program built here, installed by the launcher.

No library builds it (none that is kept up installs from PyPI without a C toolchain): the program
is small and fixed, so it is assembled here from the kernel's syscall numbers (x86-64 and
aarch64; on other machines there is no filter and the sandbox says so). It denies, with
``EPERM``, what code a model writes never needs: mounting, ``ptrace`` and reading other processes'
memory, keyrings, ``bpf``, kernel modules and ``kexec``, new namespaces (``unshare``, ``setns``,
``clone`` with a namespace flag), ``perf_event_open``, ``userfaultfd``, ``io_uring`` (whose
operations seccomp cannot see), clocks, swap and reboot. ``clone3`` gets ``ENOSYS`` (its flags
sit behind a pointer a filter cannot read), so the C library falls back to ``clone``, whose
flags it can.

``no_processes=True`` adds what the strict preset forbids: new processes (``fork``, ``vfork``,
``clone`` without ``CLONE_THREAD``) and, with ``no_exec=True``, ``execve``. Threads stay allowed.

The launcher (``_bwrap``) installs the program with ``prctl(PR_SET_SECCOMP)`` just before it
``exec``s the sandboxed command, with or without bubblewrap; filters are inherited and stack.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

__all__ = ["ARCHES", "build", "install"]

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data

_CLONE_THREAD = 0x00010000
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
_CLONE_NAMESPACES |= 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

_DENIED = (
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_getfd", "kcmp", "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
    "userfaultfd", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "unshare", "setns", "swapon", "swapoff", "reboot", "syslog", "acct",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "open_by_handle_at",
    "name_to_handle_at", "quotactl", "lookup_dcookie", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "iopl", "ioperm",
)  # fmt: skip

# Syscall numbers, from the kernel headers (asm/unistd_64.h; asm-generic/unistd.h for aarch64).
_COMMON = {"fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429,
           "open_tree": 428, "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426,
           "io_uring_register": 427, "pidfd_getfd": 438, "clone3": 435}  # fmt: skip
_X86_64 = {
    **_COMMON, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "keyctl": 250,
    "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
    "kexec_file_load": 320, "unshare": 272, "setns": 308, "swapon": 167, "swapoff": 168,
    "reboot": 169, "syslog": 103, "acct": 163, "settimeofday": 164, "clock_settime": 227,
    "clock_adjtime": 305, "adjtimex": 159, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "quotactl": 179, "lookup_dcookie": 212, "iopl": 172, "ioperm": 173, "clone": 56,
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
}  # fmt: skip
_AARCH64 = {
    **_COMMON, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "ptrace": 117,
    "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "keyctl": 219,
    "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
    "kexec_file_load": 294, "unshare": 97, "setns": 268, "swapon": 224, "swapoff": 225,
    "reboot": 142, "syslog": 116, "acct": 89, "settimeofday": 170, "clock_settime": 112,
    "clock_adjtime": 266, "adjtimex": 171, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "quotactl": 60, "lookup_dcookie": 18, "clone": 220, "execve": 221, "execveat": 281,
}  # fmt: skip
#: The machines a filter is built for: ``platform.machine()`` -> (AUDIT_ARCH_*, numbers).
ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, _X86_64),
    "aarch64": (0xC00000B7, _AARCH64),
}
_X32_BIT = 0x40000000  # x86-64's x32 ABI: other numbers, refused outright


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _errno(number: int) -> bytes:
    return _op(_RET_K, _ERRNO | number)


def build(*, no_processes: bool = False, no_exec: bool = False, machine: str = "") -> bytes:
    """The filter program (``struct sock_filter`` array) for ``machine`` (default: this one).

    Raises:
        LookupError: For a machine without syscall numbers here.
    """
    arch, numbers = ARCHES[machine or os.uname().machine]
    body: list[bytes] = [_op(_LD_W_ABS, _NR)]
    if arch == ARCHES["x86_64"][0]:
        body += [_op(_JGE_K, _X32_BIT, 0, 1), _errno(errno.ENOSYS)]
    denied = [numbers[name] for name in _DENIED if name in numbers]
    if no_processes:
        denied += [numbers[name] for name in ("fork", "vfork") if name in numbers]
    if no_exec:
        denied += [numbers["execve"], numbers["execveat"]]
    for number in denied:
        body += [_op(_JEQ_K, number, 0, 1), _errno(errno.EPERM)]
    body += [_op(_JEQ_K, numbers["clone3"], 0, 1), _errno(errno.ENOSYS)]
    # clone: refused with a namespace flag, and (no_processes) without CLONE_THREAD.
    body += [_op(_JEQ_K, numbers["clone"], 0, 5 if no_processes else 3)]
    body += [_op(_LD_W_ABS, _ARG0), _op(_JSET_K, _CLONE_NAMESPACES, 0, 1), _errno(errno.EPERM)]
    if no_processes:
        body += [_op(_JSET_K, _CLONE_THREAD, 1, 0), _errno(errno.EPERM)]
    body += [_op(_RET_K, _ALLOW)]
    # The architecture first: a syscall of another ABI (32-bit x86 on x86-64) kills the process.
    head = [_op(_LD_W_ABS, _ARCH), _op(_JEQ_K, arch, 1, 0), _op(_RET_K, _KILL_PROCESS)]
    return b"".join(head + body)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def install(program: bytes) -> None:
    """Install ``program`` on the calling thread's process (``no_new_privs`` set first).

    Raises:
        OSError: If the kernel refuses it.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    for args in (
        (_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
        (_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0),
    ):
        if libc.prctl(*[ctypes.c_ulong(a) for a in args]) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"seccomp: {errno.errorcode.get(code, code)}")
