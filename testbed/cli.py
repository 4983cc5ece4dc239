"""The Mininet CLI of a testbed run, with the testbed's own commands.

    fail l1 s1          cut a link (names or node:port), wait for the controller to see it
    restore l1 s1       bring it back, wait for the controller to see it up
    restart s1          kill -9 a switch, start it empty, wait until the controller reprogrammed it
    loss 1 | loss off   drop 1 % of UDP 4791 frames on every fabric link (never LLDP) | stop
    mrc h1 h3 [--bytes N] [--duration S] [--evs K]
                        a transfer through the hosts' agents (as mrc-perf), progress and summary
    collective allreduce h1,h5,h9,h13 [--size 16M] [--iters 10] [--transport mrc|single|roce]
                        a collective job, a rank per host on its agent, progress per iteration
    status              the controller's status (links, groups, counters, last failover)
    controller [kill|restart] [primary|backup]
                        which controller is primary; kill -9 one; start a dead one again

With a backup controller (``--backup``), a line says when a controller dies, when the backup
becomes primary, when a restarted one rejoins (as backup, or taking over) and when none is
left (``testbed.controller_watch``); ``status`` answers from whichever is primary.

Mininet's own commands keep working (``h1 ping h3``, ``nodes``, ``sh``, and on the linux
target ``s1 ip route`` inside a kernel switch), except ``link``: it sets both veth ends down,
which freezes BMv2 (docs/bmv2.md) and on any target is not what a cut shows a switch,
so it points to ``fail``/``restore`` instead. ``restart`` is refused on the linux target
(a kernel switch has no process to restart). Ctrl-C ends the CLI, like ``exit``, and the
runner tears the whole run down: unlike Mininet's own CLI, which ignores it, because the
user pressing Ctrl-C in ``make run-topology`` expects the testbed to go away.

A testbed command that fails prints ``*** error: ...`` and the CLI goes on; the runner counts
them, so a script fed on stdin can tell (the run exits 1).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from typing import Any

from mininet.cli import CLI
from mininet.util import quietRun

from agent.cli.common import parse_size, positive_float, positive_int
from agent.cli.report import perf_report, progress_line
from collective.cli import Progress, add_job_options, final_report, job_spec
from collective.job import JobHooks
from collective.report import summarize
from controller.app.status import format_status
from controller.app.status_socket import StatusUnavailable
from testbed.agents import TransferSpec
from testbed.collective_run import parse_hosts
from testbed.controller_watch import ControllerWatch
from testbed.controllers import PRIMARY
from testbed.mininet.switch_kind import SwitchKind
from testbed.session import Testbed
from testbed.stdin_lines import InterruptibleLines
from topologies.model import LinkId

#: Seconds ``fail``/``restore`` wait for the controller to see the change.
LINK_STATE_TIMEOUT_S = 15.0


class CommandError(Exception):
    """A testbed command was given wrong arguments; the message says how to call it."""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting the whole runner on a typo."""

    def error(self, message: str) -> Any:
        raise CommandError(f"{message}\nusage: {self.format_usage().strip()}")


def _mrc_parser() -> _ArgumentParser:
    parser = _ArgumentParser(prog="mrc", add_help=False)
    parser.add_argument("source")
    parser.add_argument("destination")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--bytes", type=parse_size, dest="total_bytes")
    size.add_argument("--duration", type=positive_float)
    parser.add_argument("--evs", type=positive_int)
    return parser


def _collective_parser() -> _ArgumentParser:
    parser = _ArgumentParser(prog="collective", add_help=False)
    add_job_options(parser)
    parser.add_argument("hosts", help="the ranks' hosts in ring order: h1,h5,h9,h13")
    return parser


#: What ``mrc`` sends when neither --bytes nor --duration is given.
DEFAULT_MRC_BYTES = 1 << 20


class TestbedCLI(CLI):  # type: ignore[misc]  # Mininet has no type hints
    """Mininet's CLI on the run's network, plus ``fail``, ``restore``, ``restart``, ``loss``,
    ``mrc``, ``collective``, ``status``."""

    __test__ = False

    def __init__(self, testbed: Testbed, **kwargs: Any) -> None:
        self.testbed = testbed
        self.failures = 0
        assert testbed.network.mininet is not None
        if "stdin" not in kwargs and not sys.stdin.isatty():
            # A script on stdin: read it so that Ctrl-C is never lost (testbed/stdin_lines.py).
            kwargs["stdin"] = InterruptibleLines(sys.stdin.fileno())
            self.use_rawinput = False
        assert testbed.controllers is not None
        # Mininet's CLI runs its loop inside __init__: the watch must start before it.
        self._watch = ControllerWatch(testbed.controllers, self._announce)
        with self._watch:
            super().__init__(testbed.network.mininet, **kwargs)

    def _announce(self, line: str) -> None:
        """A line from the controller watch, printed between the commands' own output."""
        out = getattr(self, "stdout", sys.stdout)
        out.write(f"*** {line}\n")
        out.flush()

    def run(self) -> None:
        """The command loop; Ctrl-C leaves it (Mininet's own loop would swallow it)."""
        if self.isatty():
            quietRun("stty echo sane intr ^C")
        try:
            self.cmdloop()
        except KeyboardInterrupt:
            self.stdout.write("\nInterrupted: tearing the testbed down\n")

    def _guarded(self, action: Callable[[], None]) -> None:
        try:
            action()
        except KeyboardInterrupt:
            raise
        except Exception as error:  # the CLI must survive any failed command
            self.failures += 1
            self.stdout.write(f"*** error: {error}\n")
        self.stdout.flush()

    def _two_nodes(self, line: str, command: str) -> tuple[str, str]:
        words = shlex.split(line)
        if len(words) != 2:
            raise CommandError(f"usage: {command} NODE[:PORT] NODE[:PORT]")
        return words[0], words[1]

    def do_fail(self, line: str) -> None:
        """fail A B: cut the link between A and B (node or node:port) at its patch point."""

        def action() -> None:
            a, b = self._two_nodes(line, "fail")
            link = self.testbed.fail(a, b)
            self.stdout.write(f"cut {link}; {self._controller_view(link, down=True)}\n")

        self._guarded(action)

    def do_restore(self, line: str) -> None:
        """restore A B: bring the link between A and B back."""

        def action() -> None:
            a, b = self._two_nodes(line, "restore")
            link = self.testbed.restore(a, b)
            self.stdout.write(f"restored {link}; {self._controller_view(link, down=False)}\n")

        self._guarded(action)

    def _controller_view(self, link: LinkId, down: bool) -> str:
        """How the controller took the change: when it saw it, or that it does not track it."""
        try:
            tracked = self.testbed.controller_tracks(link)
        except StatusUnavailable as error:  # no controller left: nobody reacts
            return str(error)
        if not tracked:
            return "a host link: the controller does not track it (hosts answer no LLDP)"
        seen = self.testbed.wait_link_state(link, down=down, timeout=LINK_STATE_TIMEOUT_S)
        return _seen("down" if down else "up", seen)

    def do_restart(self, line: str) -> None:
        """restart S: kill -9 switch S, start it empty, wait until the controller reprograms it."""

        def action() -> None:
            words = shlex.split(line)
            if len(words) != 1:
                raise CommandError("usage: restart SWITCH")
            mark = self.testbed.event_count()
            pid = self.testbed.restart(words[0])
            self.testbed.wait_in_service([words[0]], after=mark)
            self.stdout.write(f"restarted {words[0]} (pid {pid}); reprogrammed by the controller\n")

        self._guarded(action)

    def do_mrc(self, line: str) -> None:
        """mrc SRC DST [--bytes N | --duration S] [--evs K]: a transfer through the agents."""

        def action() -> None:
            args = _mrc_parser().parse_args(shlex.split(line))
            total = args.total_bytes
            if total is None and args.duration is None:
                total = DEFAULT_MRC_BYTES
            spec = TransferSpec(args.source, args.destination, total, args.duration, evs=args.evs)
            result = self.testbed.transfer(
                spec, lambda sample: self.stdout.write(progress_line(sample) + "\n")
            )
            self.stdout.write(perf_report(result, full_ev_table=False) + "\n")

        self._guarded(action)

    def do_collective(self, line: str) -> None:
        """collective COLL HOSTS [--size N] [--iters K] [--transport T] [--compute S]: a
        collective job (allreduce, allgather, reducescatter, alltoall), a rank per host."""

        def action() -> None:
            args = _collective_parser().parse_args(shlex.split(line))
            try:
                hosts = parse_hosts(args.hosts)
            except ValueError as error:
                raise CommandError(str(error)) from None
            spec, note = job_spec(args, len(hosts))
            if note:
                self.stdout.write(note + "\n")

            def show(text: str) -> None:
                self.stdout.write(text + "\n")
                self.stdout.flush()

            hooks = JobHooks(on_iteration=Progress(show, quiet=args.json))
            result = self.testbed.collective(hosts, spec, hooks)
            self.stdout.write(final_report(summarize(result), args.json) + "\n")
            if not result.ok:
                self.failures += 1

        self._guarded(action)

    def do_loss(self, line: str) -> None:
        """loss PERCENT | loss off | loss: drop that share of UDP 4791 frames on every fabric
        link (never LLDP), remove the loss, or show what the rules saw and dropped."""

        def action() -> None:
            words = shlex.split(line)
            if len(words) > 1:
                raise CommandError("usage: loss [PERCENT | off]")
            if words and words[0] == "off":
                self.testbed.clear_fabric_loss()
                self.stdout.write("every fabric link lossless again\n")
                return
            if words:
                try:
                    percent = float(words[0].removesuffix("%"))
                except ValueError:
                    raise CommandError("usage: loss [PERCENT | off]") from None
                self.testbed.set_fabric_loss(percent / 100)
                self.stdout.write(
                    f"every fabric link drops {percent:g} % of UDP 4791 frames, each way; "
                    "LLDP never\n"
                )
                return
            directions, lldp = self.testbed.fabric_loss_counters()
            seen = sum(c.matched for c in directions.values())
            dropped = sum(c.dropped for c in directions.values())
            share = f" ({100 * dropped / seen:.2f} %)" if seen else ""
            self.stdout.write(
                f"loss rules: {seen} UDP 4791 frames seen, {dropped} dropped{share}; "
                f"{lldp} LLDP frames passed\n"
                if directions
                else "no loss rules in place\n"
            )

        self._guarded(action)

    def do_status(self, _line: str) -> None:
        """status: the controller's view (links, groups, counters, last failover)."""
        self._guarded(lambda: self.stdout.write(format_status(self.testbed.status()) + "\n"))

    def do_controller(self, line: str) -> None:
        """controller [kill|restart] [primary|backup]: which controller is primary on each
        switch; kill -9 one (as a crash); start a dead one again (it rejoins as backup or
        takes over, as the target arbitrates)."""

        def action() -> None:
            words = shlex.split(line)
            if not words:
                self.stdout.write(self._controllers_line() + "\n")
                return
            if words[0] not in ("kill", "restart") or len(words) > 2:
                raise CommandError("usage: controller [kill|restart] [primary|backup]")
            name = words[1] if len(words) == 2 else PRIMARY
            try:
                if words[0] == "kill":
                    self.testbed.kill_controller(name)
                    self.stdout.write(f"killed the {name} controller (kill -9)\n")
                else:
                    role = self.testbed.restart_controller(name)
                    self.stdout.write(f"restarted the {name} controller: {role} on every switch\n")
            except (KeyError, ValueError) as error:
                raise CommandError(str(error).strip("'\"")) from None
            finally:
                self._watch.say_now()

        self._guarded(action)

    def _controllers_line(self) -> str:
        controllers = self.testbed.controllers
        assert controllers is not None
        parts = []
        for name, state in controllers.states().items():
            stance = state.stance(controllers.switches)
            alive = f"pid {state.pid}" if state.alive else "not running"
            parts.append(f"{name}: {stance} ({alive})")
        return "; ".join(parts)

    def do_link(self, _line: str) -> None:
        """link: refused (it sets the switches' own interfaces down); use fail/restore."""
        self.failures += 1
        if self.testbed.network.kind is SwitchKind.BMV2:
            why = "which freezes BMv2"
        else:
            why = "not what a cut link shows a switch (carrier loss only)"
        self.stdout.write(
            f"*** error: `link` sets both veth ends down, {why}; use `fail A B` and `restore A B`\n"
        )


def _seen(state: str, seconds: float | None) -> str:
    if seconds is None:
        return f"the controller did not report it {state} within {LINK_STATE_TIMEOUT_S:.0f} s"
    return f"the controller saw it {state} after {seconds:.1f} s"
