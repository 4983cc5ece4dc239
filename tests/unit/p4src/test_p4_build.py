"""The compiled artifacts under p4src/build/ are what the P4 sources compile to.

They are committed so that users without p4c can run BMv2; this test (run wherever p4c is
installed) fails when someone edits p4src/ and forgets `make build`. When the installed p4c is a
different version from the one recorded in p4src/build/p4c-version.txt, the BMv2 JSON may differ
for reasons that are not staleness, so only the P4Info (the control-plane contract) is compared.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hostenv.toolchain import P4C, find_tool, p4c_bmv2_backend_missing

REPO = Path(__file__).resolve().parents[3]
P4SRC = REPO / "p4src"
BUILD = P4SRC / "build"
PROGRAMS = ("mrc", "l3_baseline")
p4c = find_tool(P4C)

no_bmv2 = None if p4c is None else p4c_bmv2_backend_missing(p4c)

pytestmark = [
    pytest.mark.skipif(p4c is None, reason="p4c not installed (see `make doctor`)"),
    pytest.mark.skipif(no_bmv2 is not None, reason=f"{no_bmv2} (see `make doctor`)"),
]


def installed_p4c_version() -> str:
    assert p4c is not None
    return (
        subprocess.run([p4c, "--version"], capture_output=True, text=True, check=True)
        .stdout.splitlines()[0]
        .strip()
    )


def normalised_json(path: Path) -> dict[str, object]:
    """BMv2 JSON without the fields that name the build machine's paths."""
    data = json.loads(path.read_text())
    data.pop("program", None)
    data.pop("__meta__", None)
    text = json.dumps(data, sort_keys=True)
    return json.loads(text.replace(str(P4SRC), "p4src"))


@pytest.fixture(scope="module")
def fresh_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("p4build")
    for prog in PROGRAMS:
        subprocess.run(
            [
                p4c,
                "--target",
                "bmv2",
                "--arch",
                "v1model",
                "--std",
                "p4-16",
                "-o",
                str(out),
                "--p4runtime-files",
                str(out / f"{prog}.p4info.txt"),
                str(P4SRC / f"{prog}.p4"),
            ],
            check=True,
            capture_output=True,
            cwd=REPO,
        )
        (out / f"{prog}.p4info.txt").rename(out / f"{prog}.p4info.txtpb")
    return out


@pytest.mark.parametrize("prog", PROGRAMS)
def test_committed_p4info_matches_the_sources(fresh_build: Path, prog: str) -> None:
    committed = (BUILD / f"{prog}.p4info.txtpb").read_text()
    assert (fresh_build / f"{prog}.p4info.txtpb").read_text() == committed, (
        f"p4src/build/{prog}.p4info.txtpb is stale: run `make build` and commit it"
    )


@pytest.mark.parametrize("prog", PROGRAMS)
def test_committed_bmv2_json_matches_the_sources(fresh_build: Path, prog: str) -> None:
    recorded = (BUILD / "p4c-version.txt").read_text().strip()
    if recorded != installed_p4c_version():
        pytest.skip(f"installed p4c differs from the recorded {recorded!r}: P4Info checked only")
    assert normalised_json(fresh_build / f"{prog}.json") == normalised_json(
        BUILD / f"{prog}.json"
    ), f"p4src/build/{prog}.json is stale: run `make build`"
