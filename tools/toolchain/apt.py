"""The Debian packages a toolchain build needs, installed when missing."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable

#: Needed by every build: fetching and staging trees, patching them.
BASE_PACKAGES = ("git", "patch", "ca-certificates", "build-essential")


def missing_packages(packages: Iterable[str]) -> list[str]:
    wanted = sorted(set(packages))
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${Status}\n", *wanted],
        capture_output=True,
        text=True,
        check=False,
    )
    installed = {
        line.split()[0]
        for line in proc.stdout.splitlines()
        if line.endswith("install ok installed")
    }
    return [p for p in wanted if p not in installed]


def install(packages: list[str]) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
        check=True,
        env=env,
    )
