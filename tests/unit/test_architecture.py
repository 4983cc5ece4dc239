"""The project's import graph has no cycle between modules.

A cycle ties its modules into one unit that can only be read, tested and changed together,
and import order then decides what works. import-linter's ``acyclic_siblings`` contract
(``pyproject.toml``) keeps sibling packages acyclic, but it does not see a cycle through a
package's ``__init__``; this test looks at every module, type-checking imports included.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import networkx as nx

REPO = Path(__file__).resolve().parents[2]


def _root_packages() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["root_packages"])


def _cycles(imports: grimp.ImportGraph) -> list[str]:
    """One cycle of each knot of modules that import each other, as ``a -> b (line 12) -> a``
    (the line in the importing module)."""
    graph = nx.DiGraph(
        (importer, imported)
        for importer in imports.modules
        for imported in imports.find_modules_directly_imported_by(importer)
    )
    described = []
    for component in nx.strongly_connected_components(graph):
        if len(component) < 2:
            continue
        cycle = nx.find_cycle(graph.subgraph(component))
        steps = [cycle[0][0]]
        for importer, imported in cycle:
            details = imports.get_import_details(importer=importer, imported=imported)
            steps.append(f"{imported} (line {details[0]['line_number']})" if details else imported)
        described.append(" -> ".join(steps))
    return sorted(described)


def test_no_module_imports_itself_through_others():
    cycles = _cycles(grimp.build_graph(*_root_packages(), cache_dir=None))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_a_cycle_through_a_package_init_is_named():
    """What the import-linter contract misses: a package importing its module, which imports
    the package back."""
    imports = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b"):
        imports.add_module(module)
    imports.add_import(importer="pkg", imported="pkg.a")
    imports.add_import(importer="pkg.a", imported="pkg")
    imports.add_import(importer="pkg.b", imported="pkg.a")
    assert _cycles(imports) in (["pkg -> pkg.a -> pkg"], ["pkg.a -> pkg -> pkg.a"])
