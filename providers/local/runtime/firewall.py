"""The instances' firewall: a container reaches the internet, and nothing of the host it runs on.

A tenant's network (``console-t<uid_base>``, isolated from the other tenants' by netavark) still
routes to its bridge's gateway, which is this host: every service of the host that listens on all
interfaces (sshd, a database, the console's own servers in a small install) answers a container
there, or on any other address of the host. And a cloud VM's metadata service (169.254.169.254)
hands out the host's credentials to whoever asks from it. A container is the code of whoever rented
it, so neither may be reachable.

Two chains of the ``filter`` table, each jumped to first from its built-in chain:
- ``CONSOLE-INST-IN`` (from INPUT, what is addressed to this host): from an instance's network,
  only the answers to connections the host opened (the proxy's, the gateway's, the readiness
  checks') and DNS to the network's own resolver (aardvark-dns on the gateway) are accepted; the
  rest is rejected, so a connection is refused at once rather than left to time out.
- ``CONSOLE-INST-FWD`` (from FORWARD, what the host routes on): the denied destinations
  (``EGRESS_DENY``: link-local, so the metadata service, by default; an operator adds the site's
  private ranges) are rejected; everything else goes on to netavark's own rules (NAT to the
  internet, isolation between tenants).

Rules are added when a tenant's network is first used by a start and checked (``iptables -C``)
at every later one, so a flushed table is mended by the next start; they are never removed while
the network exists. IPv4 only: the tenants' networks have no IPv6 subnet.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

CHAIN_IN = "CONSOLE-INST-IN"
CHAIN_FORWARD = "CONSOLE-INST-FWD"
# Link-local (169.254.0.0/16) holds the cloud metadata services (AWS, GCP, Azure, Alibaba's 100.100.100.200
# is not in it: an operator on Alibaba Cloud adds it to EGRESS_DENY).
DEFAULT_EGRESS_DENY: tuple[str, ...] = ("169.254.0.0/16",)


class FirewallError(RuntimeError):
    """The rules could not be written; the start refuses to run an unfenced container."""


@dataclass(frozen=True)
class Subnet:
    cidr: str
    gateway: str


def rules_for(subnet: Subnet, *, deny: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``(chain, rule)`` pairs for one instance network, in the order they must match."""
    src = ["-s", subnet.cidr]
    comment = ["-m", "comment", "--comment", "gpu-console instances"]
    rules: list[tuple[str, list[str]]] = [
        (CHAIN_IN, [*src, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", *comment, "-j", "ACCEPT"]),
    ]
    for proto in ("udp", "tcp"):
        rules.append((CHAIN_IN, [*src, "-d", subnet.gateway, "-p", proto, "--dport", "53", *comment, "-j", "ACCEPT"]))
    rules.append((CHAIN_IN, [*src, *comment, "-j", "REJECT", "--reject-with", "icmp-admin-prohibited"]))
    for cidr in deny:
        rules.append(
            (
                CHAIN_FORWARD,
                [*src, "-d", cidr, *comment, "-j", "REJECT", "--reject-with", "icmp-admin-prohibited"],
            )
        )
    return rules


def egress_deny_valid(deny: Sequence[str]) -> tuple[str, ...]:
    """The option's networks, each checked (a typo must fail the configuration, not open the fence)."""
    out = []
    for cidr in deny:
        try:
            out.append(str(ipaddress.IPv4Network(cidr, strict=False)))
        except ValueError as exc:
            raise FirewallError(f"EGRESS_DENY: {cidr!r} is not an IPv4 network: {exc}") from exc
    return tuple(out)


Runner = Callable[[list[str]], subprocess.CompletedProcess]


def _iptables(argv: list[str]) -> subprocess.CompletedProcess:
    binary = shutil.which("iptables") or shutil.which("iptables", path="/usr/sbin:/sbin")
    if binary is None:
        raise FirewallError("iptables is not installed (run `make container-deps`)")
    return subprocess.run(  # noqa: S603 (the program found above, arguments built here)
        [binary, "-w", "10", *argv], capture_output=True, text=True, timeout=30, check=False
    )


def ensure(subnets: Iterable[Subnet], *, deny: Sequence[str] = DEFAULT_EGRESS_DENY, run: Runner = _iptables) -> int:
    """Make sure the fence stands for these networks; returns how many rules it had to add."""
    deny = egress_deny_valid(deny)
    for chain, parent in ((CHAIN_IN, "INPUT"), (CHAIN_FORWARD, "FORWARD")):
        if run(["-n", "-L", chain]).returncode != 0:
            made = run(["-N", chain])
            if made.returncode != 0 and run(["-n", "-L", chain]).returncode != 0:
                raise FirewallError(f"iptables could not make the chain {chain}: {made.stderr.strip()}")
        if run(["-C", parent, "-j", chain]).returncode != 0:
            done = run(["-I", parent, "1", "-j", chain])
            if done.returncode != 0:
                raise FirewallError(f"iptables could not jump from {parent} to {chain}: {done.stderr.strip()}")
    added = 0
    for subnet in subnets:
        rules = rules_for(subnet, deny=deny)
        if all(run(["-C", chain, *rule]).returncode == 0 for chain, rule in rules):
            continue
        # Some are missing: the network's rules are written again, all in their order (an ACCEPT
        # appended after the REJECT that was kept would never match).
        for chain, rule in rules:
            while run(["-D", chain, *rule]).returncode == 0:
                pass
        for chain, rule in rules:
            done = run(["-A", chain, *rule])
            if done.returncode != 0:
                raise FirewallError(f"iptables refused a rule of {chain}: {done.stderr.strip()}")
            added += 1
    return added
