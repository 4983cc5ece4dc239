"""The committed TNA artifacts under p4src/build/tna/ are what p4src/tna/ compiles to.

As test_p4_build.py does for BMv2: wherever p4c-barefoot is installed, the program is compiled
afresh and the committed P4Info, BF-RT schema and resource summary must match it, so an edit to
p4src/tna/ (or to the headers and controls it shares with mrc.p4) without `make build` fails
here. With a p4c-barefoot of another version than the recorded one, only the P4Info (the
control-plane contract) is compared: table placement may differ between releases. The summary's
own arithmetic is checked without the compiler.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hostenv.toolchain import P4C_BAREFOOT, find_tool, tool_version
from p4src import TNA_BUILD_DIR
from tools.build_tna import TOFINO1_STAGES, check_fits, compile_tna, resource_summary

compiler = find_tool(P4C_BAREFOOT)
needs_compiler = pytest.mark.skipif(
    compiler is None, reason="p4c-barefoot not installed (see `make doctor`)"
)


@pytest.fixture(scope="module")
def fresh_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert compiler is not None
    out = tmp_path_factory.mktemp("tna")
    compile_tna(compiler, out, None)
    return out


@needs_compiler
def test_committed_tna_p4info_matches_the_sources(fresh_build: Path) -> None:
    assert (fresh_build / "mrc.p4info.txtpb").read_text() == (
        TNA_BUILD_DIR / "mrc.p4info.txtpb"
    ).read_text(), "p4src/build/tna/mrc.p4info.txtpb is stale: run `make build` and commit it"


@needs_compiler
@pytest.mark.parametrize("name", ["bfrt.json", "resources.json"])
def test_committed_tna_schema_and_resources_match_the_sources(fresh_build: Path, name: str) -> None:
    assert compiler is not None
    recorded = (TNA_BUILD_DIR / "p4c-barefoot-version.txt").read_text().strip()
    if recorded != tool_version(P4C_BAREFOOT, compiler):
        pytest.skip(f"installed p4c-barefoot differs from the recorded {recorded!r}")
    assert json.loads((fresh_build / name).read_text()) == json.loads(
        (TNA_BUILD_DIR / name).read_text()
    ), f"p4src/build/tna/{name} is stale: run `make build` and commit it"


def test_the_committed_program_fits_tofino1() -> None:
    summary = json.loads((TNA_BUILD_DIR / "resources.json").read_text())
    assert set(summary["gress"]) == {"ingress", "egress"}
    for gress in summary["gress"].values():
        assert 0 < gress["stages_used"] <= TOFINO1_STAGES
    placed = {table["name"] for table in summary["tables"]}
    assert {"MrcIngress.next.hashed", "MrcIngress.routing.routes_v6"} <= placed


def test_summary_counts_stages_and_occupied_memories() -> None:
    power = {
        "tables": [
            {
                "gress": "ingress",
                "name": "MrcIngress.routing.routes_v6",
                "stages": [
                    {
                        "stage_number": 3,
                        "memories": [
                            {"access_type": "search", "memory_type": "tcam", "num_memories": 9},
                            {"access_type": "read", "memory_type": "sram", "num_memories": 1},
                        ],
                    },
                    {
                        "stage_number": 2,
                        "memories": [
                            {"access_type": "search", "memory_type": "tcam", "num_memories": 15},
                        ],
                    },
                ],
            },
            {
                "gress": "ingress",
                "name": "tbl_drop",
                "stages": [
                    {
                        "stage_number": 7,
                        "memories": [
                            {"access_type": "read", "memory_type": "sram", "num_memories": 1},
                            {"access_type": "write", "memory_type": "sram", "num_memories": 1},
                        ],
                    }
                ],
            },
        ],
        "total_latency": [{"gress": "ingress", "latency": 170, "pipe_number": 0}],
    }
    summary = resource_summary(power)
    ingress = summary["gress"]["ingress"]
    assert ingress["stages_used"] == 8
    assert ingress["memories"] == {"sram": 2, "tcam": 24}
    assert ingress["compiler_tables"] == 1
    assert ingress["latency_cycles"] == 170
    assert summary["tables"] == [
        {
            "name": "MrcIngress.routing.routes_v6",
            "gress": "ingress",
            "stages": [2, 3],
            "memories": {"tcam": 24, "sram": 1},
        }
    ]


def test_a_placement_past_the_last_stage_is_refused() -> None:
    fits = {"gress": {"ingress": {"stages_used": 12}, "egress": {"stages_used": 10}}}
    check_fits(fits)
    with pytest.raises(RuntimeError, match="more than 12 stages"):
        check_fits({"gress": {"ingress": {"stages_used": 13}, "egress": {"stages_used": 10}}})
