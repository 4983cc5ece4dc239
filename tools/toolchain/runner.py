"""Runs a plan: stages each source tree, then each component's steps, one log file a step.

Resumable by construction: a staged tree carries a stamp of what it holds and is not staged
again; configure steps record their arguments and are skipped when those are unchanged; make
and ninja continue where they stopped; ccache keeps compiled objects in the work folder.
Progress is one line when a step starts and one when it ends, with a line a minute in between
for long steps, so a slow build is told from a hung one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tools.toolchain import git_trees
from tools.toolchain.pins import Pins
from tools.toolchain.plan import (
    ComponentPlan,
    Plan,
    SourcePlan,
    SourceStatus,
    stamp_content,
    stamp_path,
)
from tools.toolchain.recipes import OWN_PATCHES, Context, Step, patches_for, steps

#: How often a running step reports that it is alive.
HEARTBEAT_S = 60.0
#: How long an interrupted build's processes get to stop before they are killed.
STOP_GRACE_S = 20.0
TAIL_LINES = 25


class StepFailed(RuntimeError):
    def __init__(self, component: str, step: str, log: Path, why: str) -> None:
        super().__init__(f"{component}: {step} failed ({why}); log: {log}")
        self.log = log


class Runner:
    def __init__(self, pins: Pins, plan: Plan, ctx: Context, out: TextIO = sys.stdout) -> None:
        self.pins = pins
        self.plan = plan
        self.ctx = ctx
        self.out = out
        self.started = time.monotonic()
        self.logs = ctx.work / "logs"

    def say(self, text: str) -> None:
        elapsed = int(time.monotonic() - self.started)
        print(
            f"toolchain [{elapsed // 60:02d}:{elapsed % 60:02d}] {text}", file=self.out, flush=True
        )

    def run(self) -> None:
        for component in self.plan.to_build:
            self.build(component)

    def build(self, component: ComponentPlan) -> None:
        name = component.component.name
        self.say(f"{name}: building ({component.reason})")
        # What was built against the old install is stale from here on: a run that stops
        # before rebuilding it must not leave it looking current.
        for dependent in self._dependents(name):
            if stamp_path(self.ctx.prefix, dependent).exists():
                stamp_path(self.ctx.prefix, dependent).unlink()
                self.say(f"{name}: {dependent} will be rebuilt against it (its stamp removed)")
        stamp_path(self.ctx.prefix, name).unlink(missing_ok=True)
        for source in component.component.sources_for(self.ctx.tofino):
            self.stage(name, source)
        for step in steps(component.component, self.ctx):
            self.step(name, step)
        if not self.ctx.tofino:
            self._remove_stale_tofino_files(component)
        stamp = stamp_path(self.ctx.prefix, name)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(stamp_content(self.pins, component, self.ctx.tofino), indent=2))
        self.say(f"{name}: installed under {self.ctx.prefix}")

    def _dependents(self, name: str) -> list[str]:
        """Every component that needs ``name``, directly or through another."""
        found: list[str] = []
        for component in self.pins.components:
            if name in component.needs or set(component.needs) & set(found):
                found.append(component.name)
        return found

    def _remove_stale_tofino_files(self, component: ComponentPlan) -> None:
        """A rebuild without the Tofino backend leaves no p4c-barefoot of the old one behind."""
        for relative in component.component.tofino_provides:
            path = self.ctx.prefix / relative
            if path.exists():
                path.unlink()
                self.say(
                    f"{component.component.name}: removed {path}, built from the previous "
                    "pins (make toolchain TOFINO=1 builds it again)"
                )

    # -- sources ---------------------------------------------------------------------------
    def stage(self, component: str, name: str) -> None:
        """Write the pinned tree (and its submodules, patched) to ctx.src(name), once."""
        source = self.pins.sources[name]
        tree = self.ctx.src(name)
        log_path = self.logs / f"{component}-stage-{name}.log"
        wanted = self._stage_key(name)
        marker = tree.parent / f"{name}.staged"
        if marker.exists() and marker.read_text() == wanted and tree.is_dir():
            return
        self.say(f"{component}: staging {name} at {source.commit[:12]} ({source.ref})")
        begin = time.monotonic()
        self.logs.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log:

            def note(text: str) -> None:
                print(text, file=log, flush=True)

            try:
                marker.unlink(missing_ok=True)
                shutil.rmtree(tree, ignore_errors=True)
                git_dir = self._export(name, tree, note)
                for path, sub in source.submodules:
                    self._check_submodule_pin(git_dir, name, path, sub)
                    self._export(sub, tree / path, note)
                for patch in patches_for(name, self.ctx):
                    self._patch(tree, patch, note)
            except (git_trees.GitError, OSError, subprocess.CalledProcessError) as err:
                note(str(err))
                raise StepFailed(component, f"staging {name}", log_path, str(err)) from err
        marker.write_text(wanted)
        self.say(f"{component}: staged {name} in {time.monotonic() - begin:.0f} s")

    def _stage_key(self, name: str) -> str:
        """What a staged tree holds: its commit, its submodules' and the patches applied."""
        source = self.pins.sources[name]
        parts = [source.commit, *(self.pins.sources[s].commit for _, s in source.submodules)]
        if name == "z3":  # patched with p4c's cmake/z3.patch, of p4c's pinned commit
            parts.append(self.pins.sources["p4c"].commit)
        marker = hashlib.sha256("\0".join(parts).encode())
        for patch in OWN_PATCHES.get(name, ()):
            marker.update(patch.read_bytes())
        return marker.hexdigest()

    def _check_submodule_pin(self, git_dir: Path, parent: str, path: str, sub: str) -> None:
        """The parent tree must record the submodule at the commit pins.toml gives (checked
        here for cloned trees too, which the plan could not look into)."""
        commit = self.pins.sources[parent].commit
        recorded = git_trees.gitlink(git_dir, commit, path)
        pinned = self.pins.sources[sub].commit
        if recorded != pinned:
            raise git_trees.GitError(
                f"{parent} {commit[:12]} records {path} at {(recorded or 'no submodule')[:12]}, "
                f"pins.toml gives {sub} {pinned[:12]}"
            )

    def _git_dir(self, name: str) -> Path:
        plan: SourcePlan = self.plan.source(name)
        source = plan.source
        if plan.git_dir is not None:
            return plan.git_dir
        if plan.status is SourceStatus.CLONE:
            return git_trees.clone_bare(
                source.url, self.ctx.work / "git" / source.folder, source.commit
            )
        raise git_trees.GitError(f"{name}: {plan.status.value}: {plan.detail}")

    def _export(self, name: str, dest: Path, note: Callable[[str], None]) -> Path:
        """Write ``name``'s pinned commit into ``dest``; the git directory it came from."""
        source = self.pins.sources[name]
        git_dir = self._git_dir(name)
        absent = git_trees.export_commit(git_dir, source.commit, dest)
        note(f"{name}: {source.commit} from {git_dir} into {dest}")
        if absent:
            self.say(
                f"  {name}: {len(absent)} file(s) absent from the source, left out: "
                f"{', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''}"
            )
            note("left out (absent from the source): " + " ".join(absent))
        return git_dir

    def _patch(self, tree: Path, patch: Path, note: Callable[[str], None]) -> None:
        proc = subprocess.run(
            ["patch", "-p1", "--forward", "--batch", "-d", str(tree), "-i", str(patch)],
            capture_output=True,
            text=True,
            check=False,
        )
        note(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise OSError(f"patch {patch} did not apply to {tree}: {proc.stdout.strip()}")
        note(f"applied {patch}")

    # -- steps -----------------------------------------------------------------------------
    def step(self, component: str, step: Step) -> None:
        label = f"{component}: {step.name}"
        if (
            step.done_file is not None
            and step.done_file.is_file()
            and step.done_file.read_text() == step.done_text
        ):
            self.say(f"{label}: done already")
            return
        if step.done_if_exists is not None and step.done_if_exists.exists():
            self.say(f"{label}: done already")
            return
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"{component}-{step.name}.log"
        self.say(f"{label} ... (log {log_path})")
        begin = time.monotonic()
        with log_path.open("w") as log:
            if step.action is not None:
                try:
                    step.action(self.ctx, lambda text: print(text, file=log, flush=True))
                except OSError as err:
                    raise StepFailed(component, step.name, log_path, str(err)) from err
            else:
                self._command(component, step, log, log_path)
        if step.done_file is not None:
            step.done_file.write_text(step.done_text)
        self.say(f"{label}: done in {_duration(time.monotonic() - begin)}")

    def _command(self, component: str, step: Step, log: TextIO, log_path: Path) -> None:
        argv = list(step.argv)
        if step.niced and shutil.which("nice"):
            argv = ["nice", "-n", "19", *argv]
        print("$ " + " ".join(argv), file=log, flush=True)
        begin = time.monotonic()
        try:
            # A session of its own, so that an interruption stops the compilers too, not only
            # make or ninja (which would otherwise wait for every running compile).
            proc = subprocess.Popen(
                argv,
                cwd=step.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **step.env},
                start_new_session=True,
            )
        except OSError as err:
            raise StepFailed(component, step.name, log_path, str(err)) from err
        try:
            while True:
                try:
                    rc = proc.wait(timeout=HEARTBEAT_S)
                    break
                except subprocess.TimeoutExpired:
                    last = progress_hint(last_line(log_path))
                    self.say(
                        f"{component}: {step.name}: {_duration(time.monotonic() - begin)}"
                        + (f", {last[:100]}" if last else "")
                    )
        except BaseException:
            stop_process_group(proc)
            raise
        if rc != 0:
            raise StepFailed(component, step.name, log_path, f"exit {rc}")


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the step's whole process group, SIGKILL after :data:`STOP_GRACE_S`; a second
    Ctrl-C or SIGTERM meanwhile does not cut this short."""
    stopping = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in stopping}
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=STOP_GRACE_S)
                return
            except subprocess.TimeoutExpired:
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def last_line(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = [x for x in f.read().decode(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


_NINJA_COUNT = re.compile(r"^\[\d+/\d+\]")
_SOURCE = re.compile(r"[\w./+-]+\.(?:c|cc|cpp|cxx|proto|thrift)\b")


def progress_hint(line: str) -> str:
    """What a build's last log line says about its progress: ninja's [done/total] count and
    the file being compiled, rather than a compiler's command line."""
    count = _NINJA_COUNT.match(line)
    sources = _SOURCE.findall(line)
    compiling = f"compiling {sources[-1].rsplit('/', 1)[-1]}" if sources else line[:80]
    return f"{count.group(0)} {compiling}" if count else compiling


def tail(path: Path, count: int = TAIL_LINES) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-count:]
    except OSError:
        return []


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"
