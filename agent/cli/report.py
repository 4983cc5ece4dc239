"""Human-readable reports of transfers and measurements (``--json`` prints the raw dicts).

Reports are built from the JSON results (``agent.io.stats_json`` field names), so the text a
user reads and the JSON a script parses can never disagree, whether the work was done by this
process or by the host's agent over the control socket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Above this many EVs the text report summarises the set instead of listing every EV.
EV_TABLE_MAX_ROWS = 16


def format_rate(bits_per_second: float) -> str:
    """``1.234 Gbit/s`` style, decimal units as network rates are quoted."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:.3f} {unit}"
    return f"{bits_per_second:.0f} bit/s"


def format_bytes(count: float) -> str:
    """``1.50 GiB`` style, binary units as memory and files are sized."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count:.0f} B"


def format_seconds(seconds: float | None) -> str:
    """An RTT or a duration: ``85 us``, ``1.2 ms``, ``3.00 s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def progress_line(sample: Mapping[str, Any]) -> str:
    """One interval of a measurement, as printed live on a terminal."""
    return (
        f"[{sample['elapsed_s']:6.1f}s] {format_rate(sample['goodput_bps']):>14}  "
        f"total {format_bytes(sample['total_bytes']):>10}  retx {sample['retransmits']:>6}  "
        f"cwnd {format_bytes(sample['cwnd_bytes']):>10}  srtt {format_seconds(sample['srtt_s'])}"
    )


def _causes(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{cause} {count}" for cause, count in counts.items())


def connection_lines(connection: Mapping[str, Any]) -> list[str]:
    """The sender-side statistics of a connection."""
    return [
        f"sent        {format_bytes(connection['data_bytes_sent'])} in "
        f"{connection['data_packets_sent']} data packets; "
        f"retransmits {connection['retransmits_total']} ({_causes(connection['retransmits'])})",
        f"losses      {_causes(connection['losses'])}; timeouts {connection['timeouts']}; "
        f"tail probes {connection['tail_probes']}; disproved "
        f"{connection.get('spurious_losses', 0)} (reorder window "
        f"x{connection.get('reorder_multiplier', 1)}, EVs back "
        f"{connection.get('evs_reinstated', 0)})",
        f"trims       seen {connection['trims_seen']} (last hop "
        f"{connection['trims_lasthop_seen']}); ECN echoes {connection['ecn_echoes']}",
        f"rtt         srtt {format_seconds(connection['srtt_s'])}, min "
        f"{format_seconds(connection['min_rtt_s'])}, rto {format_seconds(connection['rto_s'])}; "
        f"cwnd {format_bytes(connection['cwnd_bytes'])}",
        "EV states   "
        + ", ".join(f"{state} {count}" for state, count in connection["ev_states"].items()),
    ]


def roce_line(roce: Mapping[str, Any], ports: Sequence[int] = ()) -> str:
    """A RoCE transfer's RC and DCQCN state in one line (its QPs together); ``ports``: every
    QP's source port, when there are several."""
    if roce.get("selective_repeat"):
        recovery = f"selective repeat (NAKs {roce['naks_received']}"
    else:
        recovery = f"go-back-N {roce['go_backs']}x (NAKs {roce['naks_received']}"
    if roce.get("adaptive_retransmission"):
        timer = f"adaptive timer, rto {format_seconds(roce['rto_s'])}"
    else:
        timer = f"timeouts after {format_seconds(roce['local_ack_timeout_s'])}"
    source = f"source port {roce['source_port']}"
    if len(ports) > 1:
        source = f"{len(ports)} QPs, source ports {', '.join(map(str, ports))}"
    return (
        f"roce        {roce.get('profile', 'perftest')}: {roce['state']}, {source}; "
        f"{recovery}, {timer}), retries {roce['retries']} of "
        f"{roce['retry_cnt']}; CNPs {roce['cnps_received']}, rate "
        f"{format_rate(roce['rate_bps'])} ({roce['dcqcn_stage']}, alpha {roce['alpha']:.3f})"
    )


def ev_table(evs: list[Mapping[str, Any]]) -> list[str]:
    """Every EV of the set: plane, value, source port, state, home or stand-in, uses, losses."""
    lines = [f"{'plane':>5}  {'ev':>10}  {'sport':>5}  {'state':<11}  {'slot':<8}  uses  losses"]
    for ev in evs:
        lines.append(
            f"{ev['plane']:>5}  {ev['ev']:#010x}  {ev['source_port']:>5}  {ev['state']:<11}  "
            f"{'home' if ev['home'] else 'stand-in':<8}  {ev['uses']:>4}  {ev['losses']:>6}"
        )
    return lines


def perf_report(result: Mapping[str, Any], full_ev_table: bool) -> str:
    """The summary ``mrc-perf`` prints at the end."""
    lines = [
        f"peer        {result['peer']}: {result.get('transport', 'mrc')}, {result['evs']} EVs "
        f"over {result['planes']} plane(s), cc {result['cc']}, {result['message_size']}-byte "
        f"messages, agent {result.get('agent_build', 'unknown build')}",
        f"goodput     {format_rate(result['goodput_bps'])} ({format_bytes(result['bytes'])} "
        f"confirmed in {result['seconds']:.2f} s, {result['messages']} messages)",
    ]
    connection = result.get("connection")
    if connection is not None:
        lines.extend(connection_lines(connection))
    roce = result.get("roce")
    if roce is not None:
        ports = [qp["source_port"] for qp in result.get("roce_qps", ())]
        lines.append(roce_line(roce, ports))
    receiver = result.get("receiver") or {}
    if receiver:
        rconn = receiver.get("connection") or {}
        lines.append(
            f"receiver    {format_bytes(receiver.get('bytes_received', 0))} in "
            f"{receiver.get('messages_received', 0)} messages; duplicates "
            f"{rconn.get('duplicates_received', 0)}; ECN marks {rconn.get('ecn_marks_received', 0)}"
            f"; trims {rconn.get('trims_received', 0)}; drops {receiver.get('drops', {})}"
        )
    if connection is not None:
        evs = connection.get("evs", [])
        if full_ev_table or len(evs) <= EV_TABLE_MAX_ROWS:
            lines.extend(ev_table(evs))
        else:
            lines.append(f"(per-EV table of {len(evs)} EVs: --ev-table, or --json)")
    return "\n".join(lines)


def send_report(file: str, result: Mapping[str, Any]) -> str:
    """The line ``mrc-agent send`` prints on success."""
    return (
        f"sent {file}: {result['bytes']} bytes in {result['messages']} message(s) to "
        f"{result['peer']} in {result['seconds']:.3f} s ({format_rate(result['goodput_bps'])}); "
        f"stored as {result['remote_path']}, sha256 {result['sha256']}"
    )
