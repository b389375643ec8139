"""Tests talk to this machine only: a test whose process looks up or connects to any other host fails, naming it.

An audit hook (PEP 578) sees every name looked up (``socket.getaddrinfo``, ``gethostbyname``, ``gethostbyaddr``) and
every ``socket.connect`` (but a UDP socket's, which sends nothing), ``sendto`` and ``sendmsg`` of the pytest process
while a test (or a fixture it sets up) runs. This machine is a loopback or unspecified address, one of its own
interfaces' addresses, its own host name, or ``localhost``; a unix socket is this machine's too. Anything else fails
the test. Its blind spots: a send on a connected UDP socket raises no audit event, and a request from a thread an
earlier test left running is charged to the test running then.

Why a guard: two such requests hid in the suite, each silent. huggingface_hub was imported before HF_HUB_OFFLINE was
set, and a preview of "gsm8k" spent 23 s in its retries asking the hub. Gradio's pages built by tests asked
api.gradio.app for its latest version. Processes the tests start (workers, dashboards, the sandbox's attacks) are
outside this hook; they inherit the suite's offline settings (tests/conftest.py), and the sandbox's probes of
outside addresses go to a listener on this host (tests/security/sandbox_attacks.py).
"""

from __future__ import annotations

import ipaddress
import socket
import sys

import pytest


def _own_addresses() -> frozenset[str]:
    """The addresses of this machine's interfaces (psutil's list), and the one it would send from (a UDP socket's
    connect sends nothing; where psutil is missing, this one is all that is known)."""
    found = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        try:
            udp.connect(("10.255.255.255", 1))
            found.add(udp.getsockname()[0])
        except OSError:
            pass
    try:
        import psutil
    except ImportError:
        return frozenset(found)
    return frozenset(
        found
        | {
            address.address.split("%")[0]
            for addresses in psutil.net_if_addrs().values()
            for address in addresses
            if address.family in (socket.AF_INET, socket.AF_INET6)
        }
    )


class NetGuard:
    """A pytest plugin: records, for the test being run, each host other than this machine that its process asked
    for, and fails the test at its teardown when there was one."""

    def __init__(self) -> None:
        self.watching = False
        self.seen: list[str] = []
        self.names = frozenset({"", "localhost", socket.gethostname().lower()})
        self.addresses = _own_addresses()
        sys.addaudithook(self._audit)

    def local(self, host: object) -> bool:
        """Whether ``host`` (a name, an address, a unix socket's path) is this machine."""
        if isinstance(host, bytes):
            host = host.decode(errors="replace")
        if host is None or not isinstance(host, str) or host.startswith(("/", "\0")):
            return True
        host = host.strip("[]").split("%")[0].rstrip(".").lower()
        if host in self.names or host.endswith(".localhost"):
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            try:  # IPv4's short forms, as the resolver reads them: "127.1", "0"
                address = ipaddress.ip_address(socket.inet_ntoa(socket.inet_aton(host)))
            except OSError:
                return False  # a name that is not this machine's
        address = getattr(address, "ipv4_mapped", None) or address  # ::ffff:127.0.0.1
        return address.is_loopback or address.is_unspecified or str(address) in self.addresses

    def _audit(self, event: str, args: tuple) -> None:
        if not self.watching:
            return
        if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
            host = args[0]
        elif event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
            sock, address = args[0], args[-1]
            if getattr(sock, "family", None) == getattr(socket, "AF_UNIX", None):
                return  # a unix socket (a path, relative or not, or an abstract name) is this machine's
            if event == "socket.connect" and getattr(sock, "type", None) == socket.SOCK_DGRAM:
                return  # a UDP socket's connect sends nothing (a test's way to learn its own address); sendto does
            host = address[0] if isinstance(address, tuple) else address
        else:
            return
        if not self.local(host):
            self.seen.append(f"{event.removeprefix('socket.')} {host}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.seen, self.watching = [], True
        try:
            yield
        finally:
            self.watching = False

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "teardown" and self.seen:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} asked for a host other than this machine: "
                + "; ".join(dict.fromkeys(self.seen))
                + ". Tests talk to this machine only (127.0.0.1, its own addresses, listeners they start)."
            )


PLUGIN_NAME = "grpo-studio-net-guard"


def pytest_configure(config) -> None:
    """Install the guard once (tests/conftest.py calls this; ``-p tests.suite.net_guard`` loads it as a plugin too)."""
    if config.pluginmanager.get_plugin(PLUGIN_NAME) is None:
        config.pluginmanager.register(NetGuard(), PLUGIN_NAME)
