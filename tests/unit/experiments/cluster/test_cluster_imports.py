"""A local run never loads Dask: ``python -m experiments`` without ``--cluster``, the runner,
every experiment and the cluster's pure modules (merge, attempts, progress, the entry
function the scheduler unpickles) import neither ``dask`` nor ``distributed``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
MODULES = (
    "experiments.__main__",
    "experiments.runner",
    "experiments.registry",
    "experiments.summary",
    "experiments.cluster.entry",
    "experiments.cluster.job",
    "experiments.cluster.merge",
    "experiments.cluster.attempts",
    "experiments.cluster.progress",
)


def test_a_local_run_and_the_clusters_pure_modules_never_import_dask() -> None:
    code = (
        f"import importlib, sys\nfor name in {MODULES!r}: importlib.import_module(name)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed'}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == "[]", proc.stderr


def test_the_help_of_python_m_experiments_offers_the_cluster_without_loading_dask() -> None:
    code = (
        "import sys, contextlib, io\nfrom experiments.__main__ import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit): main(['--help'])\n"
        "print('--cluster' in out.getvalue(), 'distributed' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == "True False", proc.stderr


def test_the_scheduler_command_imports_none_of_the_experiments_or_the_testbed() -> None:
    """``python -m experiments.cluster scheduler`` loads the CLI's module alone of this
    project (the worker's modules are imported by the worker command)."""
    code = (
        "import sys\nimport experiments.cluster.__main__\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'experiments', 'testbed', 'topologies'}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == str(
        ["experiments", "experiments.cluster", "experiments.cluster.__main__"]
    ), proc.stderr
