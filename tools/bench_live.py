"""What the live view costs: ``python -m tools.bench_live [--topology leaf-spine] [--target
linux] [--seconds 20]`` prints JSON.

A testbed runs a transfer (h1 -> h3) the whole time; the live view serves it. Two windows of
``--seconds`` each are measured: the page closed (the server only follows the controller's
stream), then the page open in headless Chromium (the server also polls every agent once a
second and pushes an update). For each window: the CPU the page server's thread used, as a
fraction of one core (its ``/proc/self/task`` times over the window's wall time), the CPU of
the controller and of the agents (which answer the subscription and the polls, with the
transfer's own work in the same figure), and how many updates the page received.

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
from collections.abc import Sequence
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(stat_path: str) -> float:
    """utime + stime of a process or thread, from its ``stat`` file."""
    with open(stat_path, encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench_live")
    parser.add_argument("--topology", default="leaf-spine")
    parser.add_argument("--target", default="linux")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
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
    windows: dict[str, Any] = {}
    with (
        Testbed.open(args.topology, args.target) as testbed,
        live_view(testbed, port=0, say=lambda line: print(line, file=sys.stderr)) as server,
    ):
        assert server is not None and server._thread is not None
        assert testbed.controller is not None and testbed.agents is not None
        thread_stat = f"/proc/self/task/{server._thread.native_id}/stat"
        controller_stat = f"/proc/{testbed.controller.process.pid}/stat"
        agent_stats = [f"/proc/{a.pid}/stat" for a in testbed.agents.agents.values()]
        spec = TransferSpec("h1", "h3", duration_s=2 * args.seconds + 15)
        result: dict[str, Any] = {}
        sender = threading.Thread(target=lambda: result.update(testbed.transfer(spec)))
        sender.start()
        time.sleep(5.0)  # the transfer at full speed

        def window(updates: Any) -> dict[str, Any]:
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
            return {
                "seconds": round(wall, 2),
                "page_server_core_fraction": round(
                    (_cpu_seconds(thread_stat) - before[1]) / wall, 4
                ),
                "controller_core_fraction": round(
                    (_cpu_seconds(controller_stat) - before[2]) / wall, 4
                ),
                "agents_core_fraction": round(
                    (sum(_cpu_seconds(path) for path in agent_stats) - before[3]) / wall, 4
                ),
                "page_updates": updates() - before[4],
            }

        page: Any = None
        windows["page_closed"] = window(lambda: 0)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=flags)
            page = browser.new_page(viewport={"width": 1400, "height": 860})
            page.goto(server.url)
            page.wait_for_function("window.liveView && window.liveView.updates > 0")
            windows["page_open"] = window(lambda: page.evaluate("window.liveView.updates"))
            browser.close()
        sender.join()
    print(
        json.dumps(
            {
                "topology": args.topology,
                "target": args.target,
                "transfer_goodput_bps": result.get("goodput_bps"),
                **windows,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
