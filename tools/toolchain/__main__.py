"""`make toolchain`: build PI, behavioral-model and p4c (and with --tofino p4c's Tofino
backend) at the commits pinned in ``pins.toml``, into PREFIX.

Usage: ``python -m tools.toolchain [--prefix /usr/local] [--src DIR] [--tofino] [--only pi,bmv2]
[--plan]``.
Without ``--src`` each tree is cloned from its URL; with it, DIR holds one folder per
repository (as ``pins.toml`` names them) and each is checked for its pinned commit before
anything is built. Run it again after an interruption: it resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tools.toolchain import apt
from tools.toolchain.pins import PinError, Pins, load_pins
from tools.toolchain.plan import Plan, Request, describe, make_plan, unknown_components
from tools.toolchain.recipes import Context, recipe_id
from tools.toolchain.runner import Runner, StepFailed, tail


def default_work() -> Path:
    """Kept between runs and sessions, outside the work tree (a fresh clone loses build/)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mrc-toolchain"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make toolchain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", type=Path, default=Path("/usr/local"))
    parser.add_argument(
        "--src",
        type=Path,
        default=None,
        help="folder of source trees (P4_SRC); default: clone each",
    )
    parser.add_argument("--tofino", action="store_true", help="also p4c's Tofino backend")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated components to build (with what they need), e.g. bmv2,pi_server",
    )
    parser.add_argument(
        "--work", type=Path, default=None, help=f"kept build folder (default {default_work()})"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--plan", action="store_true", help="print the plan and stop")
    parser.add_argument("--no-apt", action="store_true", help="do not install Debian packages")
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        pins = load_pins()
    except PinError as err:
        print(f"toolchain: {err}", file=sys.stderr)
        return 2
    work = (args.work or default_work()).resolve()
    src = args.src.resolve() if args.src else None
    only = None
    if args.only is not None:
        only = frozenset(n.strip() for n in args.only.split(",") if n.strip())
        if not only:
            print("toolchain: --only names no component", file=sys.stderr)
            return 2
    if only is not None and (unknown := unknown_components(pins, only)):
        names = ", ".join(c.name for c in pins.components)
        print(
            f"toolchain: --only: no component {', '.join(unknown)} (there are {names})",
            file=sys.stderr,
        )
        return 2
    request = Request(
        prefix=args.prefix.resolve(), p4_src=src, tofino=args.tofino, work=work, only=only
    )
    plan = make_plan(pins, request, recipe_id)
    for line in describe(plan):
        print(line, flush=True)
    if plan.problems:
        print("toolchain: source trees missing or wrong; nothing was built:", file=sys.stderr)
        for problem in plan.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    if not plan.to_build:
        which = "every component asked for" if only is not None else "every component"
        print(f"toolchain: {which} is installed at its pinned version; nothing to do")
        return 0
    if args.plan:
        return 0
    if not os.access(request.prefix if request.prefix.exists() else request.prefix.parent, os.W_OK):
        print(
            f"toolchain: {request.prefix} is not writable: run as root (make toolchain does)",
            file=sys.stderr,
        )
        return 2
    ctx = Context(
        prefix=request.prefix,
        work=work,
        jobs=max(1, args.jobs),
        tofino=args.tofino,
        commits={name: source.commit for name, source in pins.sources.items()},
    )
    with _interruptible(), _exclusive(work) as holder:
        if holder is not None:
            print(
                f"toolchain: another make toolchain ({holder}) is using {work}; wait for it "
                "or stop it first",
                file=sys.stderr,
            )
            return 2
        return _build(plan, pins, ctx, install_apt=not args.no_apt)


def _build(plan: Plan, pins: Pins, ctx: Context, install_apt: bool) -> int:
    runner = Runner(pins, plan, ctx)
    try:
        if install_apt:
            packages = [*apt.BASE_PACKAGES, *(p for c in plan.to_build for p in c.component.apt)]
            if missing := apt.missing_packages(packages):
                print(f"toolchain: apt: installing {' '.join(missing)}", flush=True)
                apt.install(missing)
        runner.run()
    except subprocess.CalledProcessError as err:
        print(
            f"toolchain: FAILED: {' '.join(map(str, err.cmd))} (exit {err.returncode})",
            file=sys.stderr,
        )
        return 1
    except StepFailed as err:
        print(f"toolchain: FAILED: {err}", file=sys.stderr)
        for line in tail(err.log):
            print(f"  | {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
            print("toolchain: interrupted; run it again to resume", file=sys.stderr)
        return 130
    runner.say("all components installed")
    return 0


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """A stopped session or `kill` ends the build as Ctrl-C does: its processes stopped first
    (a background job, as `make toolchain &` is, would otherwise ignore SIGINT)."""
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, _interrupt) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _exclusive(work: Path) -> Iterator[str | None]:
    """Hold the work folder's lock for the build: None, or who holds it when another run does
    (two runs would restage trees under each other's compilers)."""
    work.mkdir(parents=True, exist_ok=True)
    with (work / "lock").open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            yield lock.read().strip() or "a process"
            return
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        yield None


if __name__ == "__main__":
    sys.exit(main())
