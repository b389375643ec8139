"""The seccomp filter each code sandbox runs under, as the classic-BPF program bubblewrap's ``--seccomp`` loads.

Rlimits cap what one process may use, but a few system calls reach resources they don't count, or kernel code an
unprivileged process rarely needs and attackers often use. Those fail with EPERM inside the sandbox:

- new namespaces (``unshare``, ``setns``, ``clone`` with a namespace flag): inside a user namespace of its own, the
  code would be "root" again and could mount an unlimited tmpfs; ``clone3`` answers ENOSYS, so glibc falls back to
  ``clone``, whose flags a filter can read (``clone3`` passes them in memory, out of a filter's reach);
- memory that RLIMIT_AS doesn't see: ``memfd_create``, ``memfd_secret``, System V ``shmget`` (a detached segment
  outlives every mapping of it);
- io_uring, bpf, userfaultfd, perf_event_open, the key ring, and the mount calls.

Only the machine's native system-call table is allowed (no i386 ``int 0x80``, no x32), since numbers differ per
table. Written out by hand rather than with libseccomp so that the worker needs no compiled dependency; the numbers
are Linux's (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h).
"""

from __future__ import annotations

import errno
import platform
import struct

# AUDIT_ARCH_* and the system-call numbers: (x86_64, aarch64).
ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
DENIED = {
    "unshare": (272, 97),
    "setns": (308, 268),
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "shmget": (29, 194),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "perf_event_open": (298, 241),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
}
CLONE, CLONE3 = (56, 220), 435
X32_BIT = 0x40000000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
KILL_PROCESS, ALLOW, ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits on a little-endian machine)


def supported() -> bool:
    """Whether there is a filter for this machine's architecture."""
    return platform.machine() in ARCHES


def program() -> bytes:
    """The filter as an array of ``struct sock_filter`` (what ``bwrap --seccomp FD`` reads)."""
    column, audit_arch = ARCHES[platform.machine()]
    deny = ERRNO | errno.EPERM
    code = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ, 1, 0, audit_arch),
        (RET, 0, 0, KILL_PROCESS),
        (LD_W_ABS, 0, 0, NR),
    ]
    if platform.machine() == "x86_64":
        code += [(JGE, 0, 1, X32_BIT), (RET, 0, 0, deny)]
    for numbers in DENIED.values():
        code += [(JEQ, 0, 1, numbers[column]), (RET, 0, 0, deny)]
    code += [(JEQ, 0, 1, CLONE3), (RET, 0, 0, ERRNO | errno.ENOSYS)]
    code += [
        (JEQ, 0, 3, CLONE[column]),
        (LD_W_ABS, 0, 0, ARG0),
        (JSET, 0, 1, NAMESPACE_FLAGS),
        (RET, 0, 0, deny),
        (RET, 0, 0, ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)
