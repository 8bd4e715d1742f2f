"""Every BACKFILL_* setting parsed once: defaults, accepted values at their bounds, and every bad value refused
with one line naming it and what is accepted."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.base.settings import Settings


def test_unset_or_empty_variables_give_the_defaults():
    """Nothing set (or set to ''): 30 s grace, 100 partitions a runner, a 60 s lease renewed every 15 s, 15 s
    to wait for an executor's answer."""
    expected = Settings(stop_grace=30.0, runner_partitions=100, lease_seconds=60.0, lease_renew_seconds=15.0,
                        request_wait=15.0)  # fmt: skip
    assert Settings.from_environment({}) == expected == Settings()
    empty = dict.fromkeys(
        ("BACKFILL_STOP_GRACE", "BACKFILL_RUNNER_PARTITIONS", "BACKFILL_LEASE_SECONDS",
         "BACKFILL_LEASE_RENEW_SECONDS", "BACKFILL_REQUEST_WAIT_SECONDS"), "",
    )  # fmt: skip
    assert Settings.from_environment(empty) == expected


def test_values_are_read_at_their_bounds():
    """Each variable's extremes are accepted: a grace of 0 (SIGKILL at once) or 3600, one partition a runner
    or a million, a lease up to an hour, a wait of 1 to 600 seconds."""
    low = Settings.from_environment({
        "BACKFILL_STOP_GRACE": "0", "BACKFILL_RUNNER_PARTITIONS": "1", "BACKFILL_LEASE_SECONDS": "0.4",
        "BACKFILL_LEASE_RENEW_SECONDS": "0.1", "BACKFILL_REQUEST_WAIT_SECONDS": "1",
    })  # fmt: skip
    assert (low.stop_grace, low.runner_partitions, low.lease_seconds, low.lease_renew_seconds, low.request_wait) == (
        0.0, 1, 0.4, 0.1, 1.0
    )  # fmt: skip
    high = Settings.from_environment({
        "BACKFILL_STOP_GRACE": " 3600 ", "BACKFILL_RUNNER_PARTITIONS": "1000000", "BACKFILL_LEASE_SECONDS": "3600",
        "BACKFILL_LEASE_RENEW_SECONDS": "3599.5", "BACKFILL_REQUEST_WAIT_SECONDS": "600",
    })  # fmt: skip
    assert (high.stop_grace, high.runner_partitions, high.lease_seconds, high.lease_renew_seconds) == (
        3600.0, 1_000_000, 3600.0, 3599.5
    )  # fmt: skip
    assert high.request_wait == 600.0 and isinstance(high.request_wait, float)


def test_seconds_are_decimals_as_people_write_them():
    """A fraction without its whole part, or a point without a fraction, is still a number of seconds."""
    assert Settings.from_environment({"BACKFILL_STOP_GRACE": ".5"}).stop_grace == 0.5
    assert Settings.from_environment({"BACKFILL_STOP_GRACE": "2."}).stop_grace == 2.0


def test_the_grace_for_other_hosts_is_read_at_its_bounds():
    """BACKFILL_OTHER_HOST_GRACE: 120 s unset, 0 (no skew tolerated) to a day."""
    assert Settings.from_environment({}).other_host_grace == 120.0
    assert Settings.from_environment({"BACKFILL_OTHER_HOST_GRACE": "0"}).other_host_grace == 0.0
    assert Settings.from_environment({"BACKFILL_OTHER_HOST_GRACE": "86400"}).other_host_grace == 86_400.0


def test_a_short_lease_is_renewed_at_a_quarter_of_it_unless_told():
    """Without BACKFILL_LEASE_RENEW_SECONDS a lease under 60 s is renewed every quarter of it, a longer one
    every 15 s."""
    assert Settings.from_environment({"BACKFILL_LEASE_SECONDS": "8"}).lease_renew_seconds == 2.0
    assert Settings.from_environment({"BACKFILL_LEASE_SECONDS": "600"}).lease_renew_seconds == 15.0


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("BACKFILL_STOP_GRACE", "nan", "BACKFILL_STOP_GRACE 'nan' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "inf", "BACKFILL_STOP_GRACE 'inf' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "-1", "BACKFILL_STOP_GRACE '-1' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "3600.5", "BACKFILL_STOP_GRACE '3600.5' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "٣", "BACKFILL_STOP_GRACE '٣' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "soon", "BACKFILL_STOP_GRACE 'soon' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "3_0", "BACKFILL_STOP_GRACE '3_0' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "1e3", "BACKFILL_STOP_GRACE '1e3' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "+5", "BACKFILL_STOP_GRACE '+5' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_STOP_GRACE", "3 0", "BACKFILL_STOP_GRACE '3 0' is not a number of seconds from 0 to 3600"),
        ("BACKFILL_LEASE_SECONDS", "6_0",
         "BACKFILL_LEASE_SECONDS '6_0' is not a number of seconds above 0 and at most 3600"),
        ("BACKFILL_RUNNER_PARTITIONS", "0",
         "BACKFILL_RUNNER_PARTITIONS '0' is not a whole number of partitions from 1 to 1,000,000"),
        ("BACKFILL_RUNNER_PARTITIONS", "1000001",
         "BACKFILL_RUNNER_PARTITIONS '1000001' is not a whole number of partitions from 1 to 1,000,000"),
        ("BACKFILL_RUNNER_PARTITIONS", "١٠",
         "BACKFILL_RUNNER_PARTITIONS '١٠' is not a whole number of partitions from 1 to 1,000,000"),
        ("BACKFILL_RUNNER_PARTITIONS", "2.5",
         "BACKFILL_RUNNER_PARTITIONS '2.5' is not a whole number of partitions from 1 to 1,000,000"),
        ("BACKFILL_LEASE_SECONDS", "0",
         "BACKFILL_LEASE_SECONDS '0' is not a number of seconds above 0 and at most 3600"),
        ("BACKFILL_LEASE_SECONDS", "3601",
         "BACKFILL_LEASE_SECONDS '3601' is not a number of seconds above 0 and at most 3600"),
        ("BACKFILL_LEASE_RENEW_SECONDS", "0",
         "BACKFILL_LEASE_RENEW_SECONDS '0' is not a number of seconds above 0 and at most 3600"),
        ("BACKFILL_REQUEST_WAIT_SECONDS", "0",
         "BACKFILL_REQUEST_WAIT_SECONDS '0' is not a whole number of seconds from 1 to 600"),
        ("BACKFILL_REQUEST_WAIT_SECONDS", "601",
         "BACKFILL_REQUEST_WAIT_SECONDS '601' is not a whole number of seconds from 1 to 600"),
        ("BACKFILL_OTHER_HOST_GRACE", "-0.5",
         "BACKFILL_OTHER_HOST_GRACE '-0.5' is not a number of seconds from 0 to 86400"),
        ("BACKFILL_OTHER_HOST_GRACE", "86401",
         "BACKFILL_OTHER_HOST_GRACE '86401' is not a number of seconds from 0 to 86400"),
        ("BACKFILL_OTHER_HOST_GRACE", "nan",
         "BACKFILL_OTHER_HOST_GRACE 'nan' is not a number of seconds from 0 to 86400"),
    ],
)  # fmt: skip
def test_a_bad_value_is_one_line_naming_it_and_what_is_accepted(name, value, message):
    """Out of range, not a number, NaN or infinity, non-ASCII digits: refused with the variable and its range."""
    with pytest.raises(BadInput) as refused:
        Settings.from_environment({name: value})
    assert str(refused.value) == message


def test_a_renewal_that_comes_after_the_expiry_is_refused():
    """Renewing every 60 s a lease of 60 s would let it lapse: refused, naming both values."""
    with pytest.raises(BadInput) as refused:
        Settings.from_environment({"BACKFILL_LEASE_SECONDS": "60", "BACKFILL_LEASE_RENEW_SECONDS": "60"})
    assert str(refused.value) == (
        "BACKFILL_LEASE_RENEW_SECONDS 60 must be below BACKFILL_LEASE_SECONDS 60: a lease must be renewed before "
        "it expires"
    )


def test_the_process_environment_is_read_when_none_is_given(monkeypatch):
    """Settings.from_environment() reads os.environ."""
    monkeypatch.setenv("BACKFILL_STOP_GRACE", "7")
    assert Settings.from_environment().stop_grace == 7.0


def test_the_largest_plan_is_read_at_its_bounds_and_refused_one_partition_over():
    """BACKFILL_MAX_PARTITIONS: 1 to the status arrays' ceiling of 50,000,000 in ASCII digits; a plan of exactly the
    limit passes and one more is refused with its count, the limit and the variable."""
    assert Settings.from_environment({"BACKFILL_MAX_PARTITIONS": "1"}).max_partitions == 1
    ceiling = Settings.from_environment({"BACKFILL_MAX_PARTITIONS": "50000000"})
    assert ceiling.max_partitions == 50_000_000
    for bad in ("50000001", "0", "٣", "1e3"):
        with pytest.raises(BadInput) as refused:
            Settings.from_environment({"BACKFILL_MAX_PARTITIONS": bad})
        assert str(refused.value) == (
            f"BACKFILL_MAX_PARTITIONS {bad!r} is not a whole number of partitions from 1 to 50,000,000"
        )
    limited = Settings.from_environment({"BACKFILL_MAX_PARTITIONS": "1000"})
    limited.check_plan_size(1000)
    with pytest.raises(BadInput) as refused:
        limited.check_plan_size(1001)
    assert str(refused.value) == (
        "the plan has 1,001 partitions, over the limit of 1,000 (BACKFILL_MAX_PARTITIONS, at most 50,000,000): use a "
        "coarser --partition or a shorter range"
    )
    Settings().check_plan_size(Settings().max_partitions)
