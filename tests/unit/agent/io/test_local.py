"""Small pieces with no network: addresses, --out-dir writing, config overrides, reports."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cli.report import (
    format_bytes,
    format_rate,
    format_seconds,
    perf_report,
    progress_line,
    send_report,
)
from agent.core import MrcConfig
from agent.io.addresses import PeerAddress, parse_peer, parse_planes
from agent.io.config_overrides import with_overrides
from agent.io.errors import UsageError
from agent.io.out_dir import check_file_name, prepare_out_dir, write_atomically

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.0.0.2", PeerAddress("10.0.0.2", 18515)),
        ("10.0.0.2:7000", PeerAddress("10.0.0.2", 7000)),
        ("h2", PeerAddress("h2", 18515)),
        ("h2:1", PeerAddress("h2", 1)),
        ("fd00::2", PeerAddress("fd00::2", 18515)),
        ("[fd00::2]", PeerAddress("fd00::2", 18515)),
        ("[fd00::2]:9", PeerAddress("fd00::2", 9)),
    ],
)
def test_peer_addresses_take_an_optional_port_ipv6_in_brackets(text, expected):
    assert parse_peer(text, 18515) == expected


def test_a_peer_prints_the_way_it_is_typed():
    assert str(PeerAddress("fd00::2", 9)) == "[fd00::2]:9"
    assert str(PeerAddress("10.0.0.2", 9)) == "10.0.0.2:9"


@pytest.mark.parametrize("text", ["", "  ", "[x]:1", "[fd00::2", "fd00::zz", ":5", "h:99999"])
def test_malformed_peers_are_usage_errors(text):
    with pytest.raises(UsageError):
        parse_peer(text, 18515)


def test_planes_keep_their_order_packed():
    assert parse_planes(["10.0.1.1", "10.0.0.1"]) == (bytes([10, 0, 1, 1]), bytes([10, 0, 0, 1]))


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "a\x00b", "x" * 256])
def test_unsafe_file_names_are_refused(name):
    with pytest.raises(UsageError):
        check_file_name(name)


def test_temporary_file_names_cannot_be_claimed_by_a_peer():
    with pytest.raises(UsageError, match="temporary"):
        check_file_name(".mrc-partial-x")


def test_a_file_is_written_whole_replacing_an_older_one_and_leaving_no_temporaries(tmp_path):
    write_atomically(tmp_path, "f.bin", b"old contents")
    path = write_atomically(tmp_path, "f.bin", bytearray(b"new"))
    assert path == tmp_path / "f.bin"
    assert path.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]


def test_out_dir_is_created_if_missing(tmp_path):
    target = tmp_path / "a" / "b"
    assert prepare_out_dir(str(target)) == target
    assert target.is_dir()


def test_an_out_dir_that_is_a_file_is_refused(tmp_path):
    file = tmp_path / "f"
    file.write_text("x")
    with pytest.raises(UsageError, match="--out-dir"):
        prepare_out_dir(str(file))


#: Run ``prepare_out_dir(argv[1])`` and print the UsageError it raises (or "accepted").
_PREPARE = """
import sys
from agent.io.errors import UsageError
from agent.io.out_dir import prepare_out_dir
try:
    prepare_out_dir(sys.argv[1])
except UsageError as error:
    print(error)
else:
    print("accepted")
"""


def _prepare_as_unprivileged_user(directory: Path) -> str:
    """What ``prepare_out_dir`` says of ``directory`` to a user without root's override of
    file permissions: this user where it is not root, else ``nobody`` (``setpriv`` drops root
    in the child only; `make unit` runs as root)."""
    drop: list[str] = []
    if os.geteuid() == 0:
        drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    result = subprocess.run(
        [*drop, sys.executable, "-c", _PREPARE, str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return result.stdout.strip()


@pytest.fixture
def shared_directory() -> Iterator[Path]:
    """A directory any user can enter (outside pytest's private tmp_path), removed after."""
    directory = Path(tempfile.mkdtemp(prefix="mrc-out-dir-"))
    directory.chmod(0o755)
    yield directory
    directory.chmod(stat.S_IRWXU)
    shutil.rmtree(directory)


def test_an_out_dir_its_user_cannot_write_is_refused(shared_directory: Path) -> None:
    unwritable = shared_directory / "read-only"
    unwritable.mkdir()
    unwritable.chmod(0o555)  # nobody, owner included, may write (root aside)
    assert _prepare_as_unprivileged_user(unwritable) == f"--out-dir {unwritable} is not writable"


def test_the_same_user_is_given_a_writable_out_dir(shared_directory: Path) -> None:
    writable = shared_directory / "open"
    writable.mkdir()
    writable.chmod(0o777)
    assert _prepare_as_unprivileged_user(writable) == "accepted"


def test_overrides_replace_only_what_is_given():
    base = MrcConfig()
    assert with_overrides(base) is base
    changed = with_overrides(base, evs=4, cc="dcqcn", payload=512)
    assert (changed.ev_set_size, changed.congestion_control, changed.payload_size) == (
        4,
        "dcqcn",
        512,
    )
    assert changed.rto_min == base.rto_min


def test_a_fabric_rate_sets_nsccs_target_to_ten_packets_at_that_rate_never_below_its_own():
    base = MrcConfig()
    slowed = with_overrides(base, fabric_rate=200)
    assert slowed.nscc.target_queue_delay == pytest.approx(10 / 200)
    assert slowed.nscc.decrease_gain == base.nscc.decrease_gain
    fast = with_overrides(base, fabric_rate=1e9)
    assert fast.nscc.target_queue_delay == base.nscc.target_queue_delay
    with pytest.raises(UsageError, match="--fabric-rate"):
        with_overrides(base, fabric_rate=0)


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"evs": 0}, "--evs"),
        ({"evs": 20000}, "--evs"),
        ({"payload": 9001}, "--payload"),
        ({"cc": "cubic"}, "nscc, dcqcn, fixed"),
    ],
)
def test_impossible_settings_become_usage_errors_naming_the_option(changes, complaint):
    with pytest.raises(UsageError, match=complaint):
        with_overrides(MrcConfig(), **changes)


@pytest.mark.parametrize(
    ("rate", "text"),
    [(1.5e9, "1.500 Gbit/s"), (2.5e6, "2.500 Mbit/s"), (999.0, "999 bit/s")],
)
def test_rates_use_decimal_units(rate, text):
    assert format_rate(rate) == text


def test_sizes_and_times_use_readable_units():
    assert format_bytes(3 << 20) == "3.00 MiB"
    assert format_bytes(100) == "100 B"
    assert format_seconds(85e-6) == "85 us"
    assert format_seconds(0.0123) == "12.3 ms"
    assert format_seconds(None) == "-"


def _connection(evs: int) -> dict:
    return {
        "data_bytes_sent": 2048,
        "data_packets_sent": 2,
        "retransmits_total": 1,
        "retransmits": {"nack": 0, "sack_gap": 1, "timeout": 0},
        "losses": {"nack": 0, "sack_gap": 1, "timeout": 0},
        "timeouts": 0,
        "tail_probes": 0,
        "trims_seen": 0,
        "trims_lasthop_seen": 0,
        "ecn_echoes": 3,
        "srtt_s": 1e-4,
        "min_rtt_s": 5e-5,
        "rto_s": 1e-3,
        "cwnd_bytes": 65536,
        "ev_states": {"GOOD": evs},
        "evs": [
            {
                "plane": 0,
                "ev": 0xC0000000 + (i << 16),
                "source_port": 0xC000 + i,
                "flow_label": 0,
                "state": "GOOD",
                "home": True,
                "uses": 5,
                "losses": 0,
            }
            for i in range(evs)
        ],
    }


def _perf_result(evs: int) -> dict:
    return {
        "peer": "10.0.0.2:18515",
        "evs": evs,
        "planes": 1,
        "cc": "nscc",
        "message_size": 65536,
        "goodput_bps": 1.2e8,
        "bytes": 15 << 20,
        "seconds": 1.0,
        "messages": 240,
        "connection": _connection(evs),
        "receiver": {"bytes_received": 15 << 20, "messages_received": 240, "drops": {}},
    }


def test_the_perf_report_shows_goodput_retransmits_by_cause_and_a_small_ev_table():
    text = perf_report(_perf_result(2), full_ev_table=False)
    assert "goodput     120.000 Mbit/s" in text
    assert "retransmits 1 (nack 0, sack_gap 1, timeout 0)" in text
    assert "ECN echoes 3" in text
    assert text.count("GOOD") == 3  # the state summary and two table rows


def _roce_qp(port: int) -> dict:
    return {
        "state": "RTS", "source_port": port, "go_backs": 0, "naks_received": 4,
        "selective_repeat": True, "adaptive_retransmission": True, "rto_s": 0.003,
        "local_ack_timeout_s": 4.29, "retries": 0, "retry_cnt": 7, "cnps_received": 0,
        "rate_bps": 1e10, "dcqcn_stage": "line rate", "alpha": 1.0,
    }  # fmt: skip


def test_the_perf_report_of_a_striped_roce_transfer_names_its_profile_qps_and_recovery():
    result = _perf_result(2) | {
        "transport": "roce",
        "roce": _roce_qp(50000) | {"profile": "adaptive", "qps": 2},
        "roce_qps": [_roce_qp(50000), _roce_qp(50001)],
    }
    text = perf_report(result, full_ev_table=False)
    assert "roce        adaptive: RTS, 2 QPs, source ports 50000, 50001" in text
    assert "selective repeat (NAKs 4, adaptive timer, rto 3.0 ms)" in text


def test_a_large_ev_set_is_summarised_unless_the_table_is_asked_for():
    summary = perf_report(_perf_result(256), full_ev_table=False)
    assert "--ev-table" in summary
    full = perf_report(_perf_result(256), full_ev_table=True)
    assert len(full.splitlines()) > 256


def test_progress_lines_and_the_send_line_carry_the_numbers():
    line = progress_line(
        {
            "elapsed_s": 2.0,
            "goodput_bps": 5e8,
            "total_bytes": 1 << 30,
            "retransmits": 7,
            "cwnd_bytes": 1 << 20,
            "srtt_s": 2e-4,
        }
    )
    assert "500.000 Mbit/s" in line and "retx      7" in line and "200 us" in line
    sent = send_report(
        "a.bin",
        {
            "bytes": 10,
            "messages": 1,
            "peer": "h:1",
            "seconds": 0.5,
            "goodput_bps": 160.0,
            "remote_path": "/out/a.bin",
            "sha256": "ab" * 32,
        },
    )
    assert sent.startswith("sent a.bin: 10 bytes") and "/out/a.bin" in sent
