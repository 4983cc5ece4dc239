"""What the live view costs: ``python -m tools.bench_live [--topology leaf-spine] [--target
linux] [--seconds 20] [--pairs 2]`` prints JSON.

A testbed runs a transfer (h1 -> h3) the whole time; the live view serves it. Windows of
``--seconds`` each alternate between the page closed (the server only follows the controller's
stream) and the page open in headless Chromium (the server also polls every agent once a
second and pushes an update), in the counter-balanced order of :mod:`tools.counterbalance`:
closed, open, open, closed, closed, open, ... (``--pairs`` pairs, at least 2), so the
machine's drift over the run weighs on both sides alike. For each window: the CPU the page
server's thread used, as a fraction of one core (its ``/proc/self/task`` times over the
window's wall time), the CPU of the controller and of the agents (which answer the
subscription and the polls, with the transfer's own work in the same figure), how many updates
the page received, and each core's busy share (:mod:`tools.core_load`). Reported: the order,
every pair with the page server's open / closed ratio and open - closed difference, and their
spread over the pairs.

Needs root, Mininet, Debian's chromium and playwright, like the browser tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from testbed.mininet.switch_target import switch_target_names
from testbed.targets import AUTO, target_help
from tools.core_load import CoreWindow, beside, overall
from tools.counterbalance import interleaved, paired_summary, spread

TICKS = os.sysconf("SC_CLK_TCK")
CLOSED, OPEN = "page_closed", "page_open"
SIDES = (CLOSED, OPEN)
#: Fewer pairs than this cannot run each side first as often as the other twice over.
MIN_PAIRS = 2
#: After a page closes, the server notices its subscription ended before the next window.
SETTLE_S = 2.0
#: The figure the pairs compare: the page server thread's CPU.
FIGURE = "page_server_core_fraction"


def _cpu_seconds(stat_path: str) -> float:
    """utime + stime of a process or thread, from its ``stat`` file."""
    with open(stat_path, encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def schedule(pairs: int) -> list[tuple[int, str]]:
    """Every window as (pair, side), in the order to run them: ABBA over ``pairs`` pairs."""
    if pairs < MIN_PAIRS:
        raise ValueError(f"need at least {MIN_PAIRS} pairs of windows, got {pairs}")
    return interleaved(SIDES, pairs)


def summarize(windows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON of the measured windows (each with ``pair`` and ``side``, in the order run):
    the order, every pair with its open / closed ratio and difference of the page server's
    CPU, their spread, and the cores' verdict over all windows."""
    by_pair: dict[int, dict[str, Any]] = {}
    for window in windows:
        entry = by_pair.setdefault(window["pair"], {"order": []})
        entry["order"].append(window["side"])
        entry[window["side"]] = window[FIGURE]
    repeats = [by_pair[pair] for pair in sorted(by_pair)]
    paired = paired_summary(repeats, OPEN, CLOSED, digits=4)
    differences = [float(r[OPEN]) - float(r[CLOSED]) for r in repeats]
    for pair, gap in zip(paired["pairs"], differences, strict=True):
        pair["difference"] = round(gap, 4)
    bottleneck = overall(window.get("cores") for window in windows)
    ratio = paired["ratio"]["median"]
    difference = spread(differences, 4)
    return {
        "order": [window["side"] for window in windows],
        "windows": list(windows),
        "pairs": paired["pairs"],
        "figure": FIGURE,
        "ratio_open_to_closed": ratio,
        "ratio_spread": paired["ratio"],
        "ratio_median_by_first": paired["ratio_median_by_first"],
        "difference_open_minus_closed": difference,
        CLOSED: paired[CLOSED],
        OPEN: paired[OPEN],
        "bottleneck": bottleneck,
        # the closed side's share can round to 0 over a short window: the difference still reads
        "summary": "page server CPU, open - closed, in cores "
        f"{beside(difference['median'], bottleneck)}; open / closed {ratio}",
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench_live")
    parser.add_argument("--topology", default="leaf-spine")
    parser.add_argument(
        "--target", default="linux", choices=[*switch_target_names(), AUTO], help=target_help()
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each window")
    parser.add_argument(
        "--pairs", type=int, default=MIN_PAIRS, help=f"pairs of windows (at least {MIN_PAIRS})"
    )
    args = parser.parse_args(argv)
    if args.pairs < MIN_PAIRS or args.seconds <= 0:
        parser.error(f"need --pairs >= {MIN_PAIRS} and --seconds > 0")
    from playwright.sync_api import sync_playwright

    from testbed.agents import TransferSpec
    from testbed.live import live_view
    from testbed.session import Testbed

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        print("bench_live: chromium not installed (make setup)", file=sys.stderr)
        return 3
    flags = ["--disable-gpu", "--disable-background-networking", "--no-first-run"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")
    plan = schedule(args.pairs)
    windows: list[dict[str, Any]] = []
    with (
        Testbed.open(args.topology, args.target) as testbed,
        live_view(testbed, port=0, say=lambda line: print(line, file=sys.stderr)) as server,
        sync_playwright() as playwright,
    ):
        assert server is not None and server._thread is not None
        assert testbed.controller is not None and testbed.agents is not None
        thread_stat = f"/proc/self/task/{server._thread.native_id}/stat"
        controller_stat = f"/proc/{testbed.controller.process.pid}/stat"
        agent_stats = [f"/proc/{a.pid}/stat" for a in testbed.agents.agents.values()]
        browser = playwright.chromium.launch(executable_path=chromium, args=flags)
        # long enough for every window, each page's load and each settle after a page closes
        duration = len(plan) * (args.seconds + 2 * SETTLE_S + 5) + 15
        spec = TransferSpec("h1", "h3", duration_s=duration)
        result: dict[str, Any] = {}
        sender = threading.Thread(target=lambda: result.update(testbed.transfer(spec)))
        sender.start()
        time.sleep(5.0)  # the transfer at full speed

        def window(page: Any) -> dict[str, Any]:
            def updates() -> int:
                return 0 if page is None else int(page.evaluate("window.liveView.updates"))

            with CoreWindow() as cores:
                before = (
                    time.monotonic(),
                    _cpu_seconds(thread_stat),
                    _cpu_seconds(controller_stat),
                    sum(_cpu_seconds(path) for path in agent_stats),
                    updates(),
                )
                while time.monotonic() - before[0] < args.seconds:
                    if page is None:
                        time.sleep(0.25)
                    else:  # the page's own event loop must run to receive updates
                        page.wait_for_timeout(250)
                wall = time.monotonic() - before[0]
                measured = {
                    "seconds": round(wall, 2),
                    FIGURE: round((_cpu_seconds(thread_stat) - before[1]) / wall, 4),
                    "controller_core_fraction": round(
                        (_cpu_seconds(controller_stat) - before[2]) / wall, 4
                    ),
                    "agents_core_fraction": round(
                        (sum(_cpu_seconds(path) for path in agent_stats) - before[3]) / wall, 4
                    ),
                    "page_updates": updates() - before[4],
                }
            return {**measured, "cores": cores.load}

        for pair, side in plan:
            if side == CLOSED:
                measured = window(None)
            else:
                page = browser.new_page(viewport={"width": 1400, "height": 860})
                page.goto(server.url)
                page.wait_for_function("window.liveView && window.liveView.updates > 0")
                measured = window(page)
                page.close()
                time.sleep(SETTLE_S)
            windows.append({"pair": pair, "side": side, **measured})
        browser.close()
        sender.join()
    print(
        json.dumps(
            {
                "topology": args.topology,
                "target": args.target,
                "seconds_per_window": args.seconds,
                "transfer_goodput_bps": result.get("goodput_bps"),
                **summarize(windows),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
