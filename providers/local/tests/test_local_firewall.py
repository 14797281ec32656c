"""The instances' firewall writes its rules in the order they must match, once, mends a table that
lost some, and refuses a denied network it cannot read. (That a container then reaches nothing of its
host is shown on real containers: ``test_local_containers.py``, the isolation test.)"""

from __future__ import annotations

import subprocess

import pytest

from providers.local.runtime.firewall import (
    CHAIN_FORWARD,
    CHAIN_IN,
    FirewallError,
    Subnet,
    egress_deny_valid,
    ensure,
)

NET = Subnet(cidr="10.89.3.0/24", gateway="10.89.3.1")


class FakeIptables:
    """The filter table as iptables keeps it: chains of rules, -N/-L/-C/-A/-I/-D answered like iptables."""

    def __init__(self) -> None:
        self.chains: dict[str, list[tuple[str, ...]]] = {
            "INPUT": [("-j", "ACCEPT-OLD")],
            "FORWARD": [("-j", "NETAVARK")],
        }
        self.calls = 0

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess:
        self.calls += 1
        op, chain, *rest = argv if argv[0] != "-n" else argv[1:]
        rule = tuple(rest)
        ok = 0
        if op == "-L":
            ok = 0 if chain in self.chains else 1
        elif op == "-N":
            ok = 1 if chain in self.chains else 0
            self.chains.setdefault(chain, [])
        elif op == "-C":
            ok = 0 if rule in self.chains.get(chain, []) else 1
        elif op == "-A":
            self.chains[chain].append(rule)
        elif op == "-I":
            position, *rule_ = rule
            self.chains[chain].insert(int(position) - 1, tuple(rule_))
        elif op == "-D":
            ok = 1
            if rule in self.chains.get(chain, []):
                self.chains[chain].remove(rule)
                ok = 0
        return subprocess.CompletedProcess(argv, ok, "", "" if ok == 0 else "iptables: Bad rule.")


def _targets(table: FakeIptables, chain: str) -> list[str]:
    return [
        " ".join(rule[rule.index("-j") :][:2]) + (f" {rule[rule.index('-d') + 1]}" if "-d" in rule else "")
        for rule in table.chains[chain]
    ]


def test_the_chains_come_first_and_the_host_is_closed_to_the_network_but_its_answers_and_dns():
    table = FakeIptables()
    assert ensure([NET], deny=("169.254.0.0/16", "192.168.0.0/16"), run=table) == 6
    assert table.chains["INPUT"][0] == ("-j", CHAIN_IN)
    assert table.chains["FORWARD"][0] == ("-j", CHAIN_FORWARD)
    assert _targets(table, CHAIN_IN) == [
        "-j ACCEPT",  # ESTABLISHED,RELATED: the answers to the proxy's, gateway's and checks' connections
        "-j ACCEPT 10.89.3.1",  # DNS on udp
        "-j ACCEPT 10.89.3.1",  # and tcp, to the network's resolver only
        "-j REJECT",
    ]
    established = table.chains[CHAIN_IN][0]
    assert "ESTABLISHED,RELATED" in established and established[:2] == ("-s", "10.89.3.0/24")
    assert [rule[rule.index("--dport") + 1] for rule in table.chains[CHAIN_IN][1:3]] == ["53", "53"]
    assert _targets(table, CHAIN_FORWARD) == ["-j REJECT 169.254.0.0/16", "-j REJECT 192.168.0.0/16"]


def test_a_second_start_adds_nothing_and_a_table_that_lost_a_rule_is_written_again_in_order():
    table = FakeIptables()
    ensure([NET], run=table)
    before = {chain: list(rules) for chain, rules in table.chains.items()}
    assert ensure([NET], run=table) == 0
    assert table.chains == before

    # Someone deleted the DNS rule: appended after the REJECT it would never match, so all are rewritten.
    del table.chains[CHAIN_IN][1]
    assert ensure([NET], run=table) == 5
    assert table.chains == before
    # Another tenant's network gets its own rules beside the first's.
    other = Subnet(cidr="10.89.4.0/24", gateway="10.89.4.1")
    assert ensure([other], run=table) == 5
    assert len(table.chains[CHAIN_IN]) == 8 and table.chains["INPUT"].count(("-j", CHAIN_IN)) == 1


def test_a_denied_network_that_is_not_one_fails_the_configuration():
    with pytest.raises(FirewallError, match="not an IPv4 network"):
        egress_deny_valid(["169.254.0.0/16", "metadata.internal"])
    assert egress_deny_valid(["100.100.100.200"]) == ("100.100.100.200/32",)
