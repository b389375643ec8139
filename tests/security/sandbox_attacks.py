"""Attacks on the code_tests sandbox, and a harness that runs them as whichever user starts it.

``tests/security/test_sandbox.py`` runs the harness twice, as root and as ``nobody`` (CI is root, so the unprivileged run
drops privileges with ``setpriv``), feeds it the attacks as JSON on stdin, and judges containment from the verdicts it
prints and from what it can see outside: files, listeners, leftover processes, free space. This module imports only
the standard library and ``trainer.scoring.sandbox``, so the system's Python can run it as ``nobody``.

Each attack is candidate code plus the tests it is judged by, and what containment looks like in the verdict:

- ``zero``: a wrong solution trying to forge a passing verdict; contained when it scores 0;
- ``full``: a probe whose function returns what it managed (``[]`` for nothing); contained when every test passes,
  so a broken sandbox can't pass for a safe one;
- ``outside``: its effect is judged from outside (leftover processes, listeners, files, sibling jobs).

Code templates use ``$name`` placeholders for the run's context (see :func:`attacks`).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from string import Template


@dataclass(frozen=True)
class Attack:
    """One hostile (or honest control) solution."""

    code: str
    tests: tuple[str, ...]
    expect: str  # zero | full | outside


TWO_SUM_TESTS = (
    "assert two_sum([2, 7, 11, 15], 9) == [0, 1]",
    "assert two_sum([3, 2, 4], 6) == [1, 2]",
    "assert two_sum([3, 3], 6) == [0, 1]",
    "assert two_sum([-1, -2, -3, -4, -5], -8) == [2, 4]",
)
TWO_SUM = """
def two_sum(nums, target):
    seen = {}
    for j, x in enumerate(nums):
        if target - x in seen:
            return [seen[target - x], j]
        seen[x] = j
"""
PROBE = ("assert probe() == []",)
FRAME = "def frame(m):\n    body = json.dumps(m).encode()\n    return len(body).to_bytes(4, 'big') + body\n"

_ATTACKS = {
    # --- forged verdicts: wrong answers, each trying to make the judge believe otherwise --------------------------
    "forge: mutate __main__ and the runner's result": Attack(
        "import __main__, sys\n"
        "__main__.result = {'passed': 10**6, 'total': 1, 'status': 'ok'}\n"
        "sys.modules['__main__'].__dict__['passed'] = 10**6\n"
        "def two_sum(nums, target):\n    __main__.result['passed'] = 10**6\n    return None\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: print a fake result line, then os._exit(0)": Attack(
        "import json, os\n"
        "line = '\\n@@RESULT@@' + json.dumps({'passed': 1000, 'total': 4, 'status': 'ok', 'errors': []}) + '\\n'\n"
        "def two_sum(nums, target):\n"
        "    for fd in range(64):\n"
        "        try:\n            os.write(fd, line.encode())\n        except OSError:\n            pass\n"
        "    os._exit(0)\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: well-formed frames claiming a pass on every fd, then exit": Attack(
        "import json, os\n" + FRAME + "claims = [{'ready': True}, {'passed': 4, 'total': 4, 'status': 'ok'},\n"
        "          {'value': True}, {'score': 1.0}, {'result': 'pass'}]\n"
        "def two_sum(nums, target):\n"
        "    for fd in range(64):\n"
        "        for claim in claims:\n"
        "            try:\n                os.write(fd, frame(claim))\n            except OSError:\n                pass\n"
        "    os._exit(0)\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: patch json.dumps": Attack(
        "import json\n"
        'json.dumps = lambda *a, **k: \'{"passed": 4, "total": 4, "status": "ok", "value": true}\'\n'
        "def two_sum(nums, target):\n    return None\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: object whose __eq__ is always True": Attack(
        "class Same:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = object.__hash__\n"
        "def two_sum(nums, target):\n    return Same()\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: list and int subclasses equal to everything": Attack(
        "class L(list):\n    def __eq__(self, other):\n        return True\n"
        "class I(int):\n    def __eq__(self, other):\n        return True\n"
        "calls = [0]\n"
        "def two_sum(nums, target):\n    calls[0] += 1\n    return L([9]) if calls[0] % 2 else [I(0), I(1)]\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: rewrite the in-sandbox server's framing": Attack(
        "import json, sys\n" + FRAME + "server = sys.modules['__main__']\n"
        "server.frame = lambda m: frame({'passed': 4, 'total': 4, 'status': 'ok', 'ready': True})\n"
        "server.encode = lambda v, depth=0: {'passed': 4}\n"
        "def two_sum(nums, target):\n    return None\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: non-JSON return values (generator, function, bytes, complex)": Attack(
        "values = iter([iter([0, 1]), lambda: [0, 1], b'[0, 1]', 1j, object()])\n"
        "def two_sum(nums, target):\n    return next(values)\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: a 50 MB answer": Attack(
        "def two_sum(nums, target):\n    return 'x' * (50 * 2**20)\n", TWO_SUM_TESTS, "zero"
    ),
    "forge: a frame header announcing 4 GB": Attack(
        "import os, sys, time\n"
        "def two_sum(nums, target):\n"
        "    os.write(int(sys.argv[2]), b'\\xff\\xff\\xff\\xff' + b'x' * 65536)\n    time.sleep(30)\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: malformed frames (bad JSON, not an object, 100k-deep nesting, bad tags)": Attack(
        "import os, sys\n"
        "out = int(sys.argv[2])\n"
        "bodies = iter([b'{not json', b'[1, 2]', b'[' * 100000 + b']' * 100000,\n"
        '               b\'{"value": {"set": [[1]]}}\', b\'{"value": {"tuple": 5, "x": 1}}\'])\n'
        "def two_sum(nums, target):\n"
        "    body = next(bodies)\n    os.write(out, len(body).to_bytes(4, 'big') + body)\n    return None\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: SystemExit, KeyboardInterrupt and GeneratorExit from the function": Attack(
        "errors = iter([SystemExit(0), KeyboardInterrupt(), GeneratorExit(), SystemExit('ok')])\n"
        "def two_sum(nums, target):\n    raise next(errors)\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "forge: os._exit(0) at import": Attack("import os\nos._exit(0)\n" + TWO_SUM, TWO_SUM_TESTS, "zero"),
    # --- reads, writes and secrets outside the job ------------------------------------------------------------
    "secrets: environment and argv": Attack(
        "import os, sys\n"
        "def probe():\n"
        "    found = [k for k in os.environ if k not in ('PATH', 'LANG', 'HOME', 'PWD')]\n"
        "    return found + [a for a in sys.argv if '$marker' in a]\n",
        PROBE,
        "full",
    ),
    "secrets: /proc/<ppid>/environ and every /proc/*/environ": Attack(
        "import os\n"
        "def probe():\n"
        "    found = []\n"
        "    pids = ['self', '1', str(os.getppid())] + (os.listdir('/proc') if os.path.isdir('/proc') else [])\n"
        "    for pid in pids:\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/environ', 'rb') as f:\n"
        "                if b'$marker' in f.read():\n                    found.append(pid)\n"
        "        except OSError:\n            pass\n"
        "    return found\n",
        PROBE,
        "full",
    ),
    "read outside: /etc/passwd, the database, host /tmp, the repository, /root, /home": Attack(
        "import os\n"
        "def probe():\n"
        "    found = []\n"
        "    for path in ['/etc/passwd', '/etc/shadow', '/etc/hostname', '$db', '$host_file', '$repo/pyproject.toml',\n"
        "                 '/root', '/home', '/var/log', '/proc/1/cmdline', '/sys/kernel', '/run']:\n"
        "        try:\n"
        "            if os.path.isdir(path):\n                os.listdir(path)\n"
        "            else:\n                open(path, 'rb').read(1)\n"
        "            found.append(path)\n"
        "        except OSError:\n            pass\n"
        "    return found\n",
        PROBE,
        "full",
    ),
    "write outside: the database, /etc, /usr, /, /dev, /dev/shm, /var/tmp, the repository": Attack(
        "import os\n"
        "def probe():\n"
        "    found = []\n"
        "    for path in ['$db', '/etc/x', '/usr/x', '/x', '/dev/x', '/dev/shm/x', '/var/tmp/x', '$repo/x',\n"
        "                 '/usr/bin/python3']:\n"
        "        try:\n"
        "            with open(path, 'ab') as f:\n                f.write(b'x')\n"
        "            found.append(path)\n"
        "        except OSError:\n            pass\n"
        "    for act in (lambda: os.remove('$db'), lambda: os.rename('$db', '/tmp/db-$marker'), lambda: os.chmod('/usr', 0o777)):\n"
        "        try:\n            act()\n            found.append('changed')\n"
        "        except OSError:\n            pass\n"
        "    return found\n",
        PROBE,
        "full",
    ),
    "write host /tmp: recreate the host's directory inside and write there": Attack(
        "import os\n"
        "def probe():\n"
        "    os.makedirs('$host_dir', exist_ok=True)\n"
        "    with open('$host_dir/escaped-$marker', 'w') as f:\n        f.write('x')\n"
        "    return []\n",
        PROBE,
        "full",
    ),
    "symlinks and hard links to the database": Attack(
        "import os\n"
        "def probe():\n"
        "    found = []\n"
        "    os.symlink('$db', '/tmp/link-$marker')\n"
        "    try:\n        found.append(open('/tmp/link-$marker', 'rb').read())\n    except OSError:\n        pass\n"
        "    try:\n        os.link('$db', '/tmp/hard-$marker')\n        found.append('linked')\n    except OSError:\n        pass\n"
        "    return found\n",
        PROBE,
        "full",
    ),
    "open fds: any host file or directory left open": Attack(
        "import os, stat\n"
        "def probe():\n"
        "    found = []\n"
        "    for fd in range(3, 1024):\n"
        "        try:\n            mode = os.fstat(fd).st_mode\n        except OSError:\n            continue\n"
        "        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):\n            found.append(fd)\n"
        "    return found\n",
        PROBE,
        "full",
    ),
    "/proc, /dev and /sys as seen inside": Attack(
        "import os\n"
        "def probe():\n"
        "    found = [p for p in ('/proc/1', '/proc/self', '/sys/class', '/dev/shm', '/dev/mem') if os.path.exists(p)]\n"
        "    return found + sorted(set(os.listdir('/dev')) - {'null', 'zero', 'urandom'})\n",
        PROBE,
        "full",
    ),
    "read the next test's request before answering": Attack(
        "import os, sys\n"
        "def peek(n):\n"
        "    fd = int(sys.argv[1])\n    os.set_blocking(fd, False)\n"
        "    try:\n        return os.read(fd, 65536).decode('latin-1')\n"
        "    except BlockingIOError:\n        return ''\n"
        "    finally:\n        os.set_blocking(fd, True)\n",
        ("assert peek(1) == ''", "assert peek(2) == ''"),
        "full",
    ),
    # --- network ----------------------------------------------------------------------------------------------
    "sockets: TCP, TCP Fast Open, UDP, IPv6, unix path and abstract, packet, netlink": Attack(
        "import socket\n"
        "def attempt(family, kind, address, flags=0):\n"
        "    try:\n"
        "        s = socket.socket(family, kind)\n        s.settimeout(0.5)\n"
        "        if flags or kind != socket.SOCK_STREAM:\n            s.sendto(b'$marker', flags, address)\n"
        "        else:\n            s.connect(address)\n            s.sendall(b'$marker')\n"
        "        return 'sent'\n"
        "    except OSError as exc:\n        return type(exc).__name__\n"
        "def probe():\n"
        "    # a stream that connects reached a listener: nothing listens inside the sandbox\n"
        "    streams = {\n"
        "        'tcp': attempt(socket.AF_INET, socket.SOCK_STREAM, ('127.0.0.1', $tcp_port)),\n"
        "        'tcp host ip': attempt(socket.AF_INET, socket.SOCK_STREAM, ('$host_ip', $tcp_port)),\n"
        "        'tcp outside': attempt(socket.AF_INET, socket.SOCK_STREAM, ('1.1.1.1', 53)),\n"
        "        'tcp fast open': attempt(socket.AF_INET, socket.SOCK_STREAM, ('127.0.0.1', $tcp_port), socket.MSG_FASTOPEN),\n"
        "        'tcp fast open outside': attempt(socket.AF_INET, socket.SOCK_STREAM, ('1.1.1.1', 53), socket.MSG_FASTOPEN),\n"
        "        'tcp6': attempt(socket.AF_INET6, socket.SOCK_STREAM, ('::1', $tcp_port)),\n"
        "        'unix path': attempt(socket.AF_UNIX, socket.SOCK_STREAM, '$unix_path'),\n"
        "        'unix abstract': attempt(socket.AF_UNIX, socket.SOCK_STREAM, '\\0$abstract'),\n"
        "    }\n"
        "    # datagrams and raw sockets may 'send' into the sandbox's own loopback: judged by the host's listeners\n"
        "    attempt(socket.AF_INET, socket.SOCK_DGRAM, ('127.0.0.1', $udp_port))\n"
        "    attempt(socket.AF_INET, socket.SOCK_DGRAM, ('$host_ip', $udp_port))\n"
        "    attempt(socket.AF_INET, socket.SOCK_DGRAM, ('1.1.1.1', 53))\n"
        "    attempt(socket.AF_UNIX, socket.SOCK_DGRAM, '\\0$abstract')\n"
        "    attempt(socket.AF_PACKET, socket.SOCK_RAW, ('lo', 0))\n"
        "    attempt(socket.AF_NETLINK, socket.SOCK_RAW, (0, 0))\n"
        "    return [name for name, outcome in streams.items() if outcome == 'sent']\n",
        PROBE,
        "full",
    ),
    # --- processes, signals, resources ------------------------------------------------------------------------
    "signal the parent: os.kill(os.getppid(), 9), kill(1, 9), SIGSTOP": Attack(
        "import os, signal\n"
        "def probe():\n"
        "    for pid, sig in ((os.getppid(), signal.SIGKILL), (1, signal.SIGKILL), (1, signal.SIGSTOP)):\n"
        "        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass\n"
        "    return []\n",
        PROBE,
        "full",
    ),
    "kill every pid it can name, then kill(-1)": Attack(
        "import os\n"
        "def probe():\n"
        "    for pid in range(1, 65536):\n"
        "        if pid != os.getpid():\n"
        "            try:\n                os.kill(pid, 9)\n            except OSError:\n                pass\n"
        "    os.kill(-1, 9)\n    return []\n",
        PROBE,
        "outside",
    ),
    "setsid daemon (double fork) that outlives the job": Attack(
        "import os\n"
        "def probe():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(120)', 'daemon-$marker'])\n"
        "        os._exit(0)\n"
        "    return []\n",
        PROBE,
        "full",
    ),
    "daemon that rewrites job files for later sandboxes": Attack(
        "import os\n"
        "def probe():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        code = ('import glob, time\\nwhile True:\\n'\n"
        '                \'    for p in glob.glob("/tmp/**", recursive=True) + glob.glob("$host_dir/*"):\\n\'\n'
        '                \'        try:\\n            open(p, "w").write("passed")\\n\'\n'
        "                '        except OSError:\\n            pass\\n    time.sleep(0.05)\\n')\n"
        "        os.execv('/usr/bin/python3', ['python3', '-c', code, 'rewriter-$marker'])\n"
        "    return []\n",
        PROBE,
        "full",
    ),
    "pipe holder: a setsid child keeps every pipe open, the answers are right": Attack(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n    os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(120)', 'holder-$marker'])\n"
        + TWO_SUM,
        TWO_SUM_TESTS,
        "full",
    ),
    "pipe holder, then the main process exits": Attack(
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n    os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(120)', 'holder2-$marker'])\n"
        "os._exit(3)\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "fork bomb (re-executed with a marker, so leftovers can be found)": Attack(
        "import os, sys\n"
        "bomb = 'import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n        pass\\n'\n"
        "os.execv(sys.executable, [sys.executable, '-c', bomb, 'bomb-$marker'])\n",
        TWO_SUM_TESTS,
        "zero",
    ),
    "memory bomb: a 10 GiB bytearray": Attack("x = bytearray(10 * 1024**3)\n" + TWO_SUM, TWO_SUM_TESTS, "zero"),
    "memory and namespaces outside the rlimits: memfd, SysV shm, unshare, mount": Attack(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def probe():\n"
        "    found = []\n"
        "    try:\n        os.memfd_create('x')\n        found.append('memfd_create')\n    except OSError:\n        pass\n"
        "    if libc.shmget(0, 1 << 20, 0o1000 | 0o600) >= 0:\n        found.append('shmget')\n"
        "    for name, flags in (('user', 0x10000000), ('mount', 0x00020000), ('net', 0x40000000)):\n"
        "        if libc.unshare(flags) == 0:\n            found.append('unshare ' + name)\n"
        "    if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:\n        found.append('mount')\n"
        "    return found\n",
        PROBE,
        "full",
    ),
    "disk filling: 600 MB into /tmp and the working directory": Attack(
        "import os\n"
        "def probe():\n"
        "    written, chunk = 0, b'x' * 2**20\n"
        "    for i in range(600):\n"
        "        try:\n"
        "            with open(f'/tmp/fill-$marker-{i % 40}', 'ab') as f:\n                f.write(chunk)\n"
        "            written += len(chunk)\n"
        "        except OSError:\n            break\n"
        "    return written\n",
        ("assert probe() <= 64 * 1024 * 1024",),
        "full",
    ),
    "infinite loop inside a test": Attack(
        "def two_sum(nums, target):\n    while True:\n        pass\n", TWO_SUM_TESTS, "zero"
    ),
    "sleep inside a test": Attack(
        "import time\ndef two_sum(nums, target):\n    time.sleep(100)\n", TWO_SUM_TESTS, "zero"
    ),
    # --- honest controls in the same batch --------------------------------------------------------------------
    "honest: prints, stderr and a __main__ block": Attack(
        "import sys\nprint('x' * 10**6)\nsys.stderr.write('noise' * 10**5)\n"
        + TWO_SUM
        + "if __name__ == '__main__':\n    print(two_sum(input(), 0))\n",
        TWO_SUM_TESTS,
        "full",
    ),
}


def attacks(**context: str) -> dict[str, Attack]:
    """The attacks with ``$marker``, ``$db``, ``$host_dir``, ``$host_file``, ``$repo``, ``$tcp_port``, ``$udp_port``,
    ``$host_ip``, ``$unix_path`` and ``$abstract`` filled in."""
    return {
        name: Attack(
            Template(a.code).substitute(context), tuple(Template(t).substitute(context) for t in a.tests), a.expect
        )
        for name, a in _ATTACKS.items()
    }


def main() -> None:
    """Read {"jobs": {name: [code, tests]}, "later": [[code, tests], ...], "limits": {...}} from stdin, run the jobs
    at once, then the later ones (after every earlier sandbox has ended), and print the verdicts as JSON."""
    from trainer.scoring.sandbox import Limits, run_many, run_tests

    spec = json.load(sys.stdin)
    limits = Limits(**spec["limits"])

    def timed(job):
        started = time.monotonic()
        verdict = run_tests(job[0], job[1], limits)
        return {**verdict.__dict__, "score": verdict.score, "seconds": time.monotonic() - started}

    names = list(spec["jobs"])
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = dict(zip(names, pool.map(timed, [spec["jobs"][n] for n in names])))
    later = [v.score for v in run_many([tuple(job) for job in spec["later"]], limits)]
    json.dump({"verdicts": results, "later": later}, sys.stdout)


if __name__ == "__main__":
    main()
