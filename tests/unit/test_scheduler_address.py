"""A Dask scheduler's address is checked as it is given (``--dask-scheduler``, ``DASK_SCHEDULER_ADDRESS``, Dask's
``scheduler-address``): Dask's client took anything and failed later, with a traceback or a wait."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.execute.dask_launcher import scheduler_address
from engine.spec.backfill_spec import check_scheduler_address


@pytest.mark.parametrize(
    "address",
    ["tcp://scheduler:8786", "tcp://10.0.0.7:1", "tcp://[::1]:65535", "tls://sched-01.corp.example:8786",
     "ws://127.0.0.1:8786", "wss://a:443", "tcp://compose_dask-scheduler_1:8786", "tcp://[fe80::1%eth0]:8786"],
)  # fmt: skip
def test_scheme_host_and_port_are_a_scheduler_s_address(address):
    """tcp, tls, ws and wss; a name (a Docker service's, with underscores), an IPv4 address or a bracketed IPv6
    one (with its zone); a port from 1 to 65535."""
    assert check_scheduler_address(address, "--dask-scheduler") == address


@pytest.mark.parametrize(
    "address",
    ["localhost", "localhost:8786", "tcp://", "tcp://host", "tcp://:8786", "tcp://[::1", "tcp://host:0",
     "tcp://host:65536", "tcp://host:٨٧٨٦", "http://host:8787", "inproc://x", "tcp://exa mple:1", "tcp://-host:1",
     "tcp://host:8786/", " tcp://host:8786", ""],
)  # fmt: skip
def test_anything_else_is_refused_naming_where_it_came_from(address):
    """No scheme, no host or port, a port out of range or in other digits, another scheme, stray characters."""
    with pytest.raises(BadInput, match=r"^--dask-scheduler .* is not a Dask scheduler's address: give tcp://HOST:PORT"):
        check_scheduler_address(address, "--dask-scheduler")


def test_the_environment_and_dask_s_setting_are_checked_too(monkeypatch):
    """DASK_SCHEDULER_ADDRESS and Dask's scheduler-address setting are named when they are wrong."""
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "localhost")
    with pytest.raises(BadInput, match=r"^DASK_SCHEDULER_ADDRESS 'localhost' is not"):
        scheduler_address(None)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    dask = pytest.importorskip("dask")
    with dask.config.set({"scheduler-address": "http://x:1"}):
        with pytest.raises(BadInput, match=r"^Dask's scheduler-address setting 'http://x:1' is not"):
            scheduler_address(None)
        assert scheduler_address("tcp://given:1") == "tcp://given:1"  # the option wins
