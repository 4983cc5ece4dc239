"""A topology file past the reader's limits (1 MiB, 32 levels, 250,000 values with aliases
expanded) or of no sensible content at all is a TopologyError naming the file and the line,
quickly and never as another exception; anchors and merge keys within the limits still work."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies import PRESETS, TopologyError, load_topology_file, load_topology_text
from topologies.bounded_yaml import MAX_BYTES, MAX_DEPTH

#: Nine levels of ten aliases each: a billion values once expanded, a few hundred bytes as text.
BILLION_LAUGHS = (
    'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]\n"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
)


def _problem(text: str) -> str:
    with pytest.raises(TopologyError) as caught:
        load_topology_text(text, source="t.yaml")
    assert len(caught.value.problems) == 1
    return str(caught.value.problems[0])


@pytest.mark.timeout(60)  # a hang guard only: expanded, the aliases would be 10**9 values
def test_a_billion_laughs_is_refused_at_the_line_where_the_expansion_passes_the_limit():
    # Refused at line 6, at 250000 values: counting stopped there, nothing beyond was expanded.
    problem = _problem(BILLION_LAUGHS)
    assert problem == "t.yaml:6: more than 250000 values once aliases are expanded"


def test_a_merge_key_bomb_is_refused_before_the_merges_are_flattened():
    text = "a: &a {x: 1, y: 2, z: 3, w: 4, v: 5, u: 6, t: 7, s: 8, r: 9, q: 10}\n" + "".join(
        f"{name}: &{name} {{<<: [{', '.join([f'*{previous}'] * 10)}]}}\n"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    assert "more than 250000 values once aliases are expanded" in _problem(text)


def test_deep_nesting_is_refused_at_the_line_it_passes_the_limit():
    within = "".join("  " * level + "a:\n" for level in range(MAX_DEPTH)) + "  " * MAX_DEPTH + "1\n"
    assert "unknown field 'a'" in _problem(within)  # 32 mappings deep: read, then checked
    deep = "".join("  " * level + "a:\n" for level in range(100))
    assert _problem(deep) == f"t.yaml:{MAX_DEPTH + 1}: nested deeper than {MAX_DEPTH} levels"
    flow = "switches: " + "[" * 100_000 + "]" * 100_000 + "\n"
    assert _problem(flow) == f"t.yaml:1: nested deeper than {MAX_DEPTH} levels"


def test_aliases_that_nest_a_shallow_document_deep_are_refused():
    chain = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 5000))
    assert f"aliases nest it deeper than {MAX_DEPTH} levels" in _problem(chain)


def test_a_recursive_merge_key_is_refused_not_a_recursion_error():
    assert _problem("switches: &x {<<: *x}\n") == "t.yaml:1: recursive YAML alias"


def test_a_merge_of_something_that_is_not_a_mapping_is_a_problem_at_its_line():
    assert "bad YAML merge key" in _problem("name: t\nswitches: {<<: 3}\n")


def test_an_oversized_file_is_refused_naming_its_size(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# padding\n" * (MAX_BYTES // 10 + 1))
    with pytest.raises(TopologyError) as caught:
        load_topology_file(path)
    size = path.stat().st_size
    assert str(caught.value) == (
        f"{path}:1: a file may hold at most {MAX_BYTES} bytes; this one is {size} bytes"
    )
    with pytest.raises(TopologyError, match=f"at most {MAX_BYTES} bytes"):
        load_topology_text("#" * (MAX_BYTES + 1))


def test_a_device_that_never_ends_is_read_no_further_than_the_limit():
    with pytest.raises(TopologyError, match="larger than that"):
        load_topology_file("/dev/zero")


def test_binary_garbage_is_a_problem_at_its_line(tmp_path):
    path = tmp_path / "garbage.yaml"
    path.write_bytes(b"name: t\nswitches: []\n\x89PNG\r\n\x1a\n\xff\xd8\x00")
    with pytest.raises(TopologyError) as caught:
        load_topology_file(path)
    assert str(caught.value).startswith(f"{path}:3: not UTF-8 text")
    assert _problem("name: t\n\nswitches: \x00\x01\n").startswith("t.yaml:3: YAML error")


def test_the_shipped_presets_stay_far_within_the_limits():
    for preset in PRESETS.values():
        assert preset.path.stat().st_size < MAX_BYTES // 10
        load_topology_file(preset.path)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_any_text_is_a_topology_or_a_topology_error(text):
    try:
        load_topology_text(text, source="fuzz.yaml")
    except TopologyError as error:
        assert all(problem.line >= 1 for problem in error.problems)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["switches:", "  - ", "&a ", "*a", "<<: ", "{", "}", "[", "]", ", ", ": ", "\n", "x"]
        ),
        max_size=40,
    ).map("".join)
)
def test_any_mix_of_yaml_structure_and_aliases_is_a_topology_or_a_topology_error(text):
    with contextlib.suppress(TopologyError):
        load_topology_text(text, source="fuzz.yaml")
