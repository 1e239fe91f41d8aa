"""An import-linter contract the built-in ones leave out: no cycle between any two modules, a package's
`__init__` and its own submodules included (`acyclic_siblings` only sees siblings). Checked by `make lint`
(`lint-imports`, configured in pyproject.toml) on the graph import-linter builds with grimp."""

from __future__ import annotations

from typing import Any

from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AcyclicModulesContract(Contract):
    type_name = "acyclic_modules"

    root = fields.StringField()

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        root = str(self.root)
        cycles, seen = [], set()
        for importer in sorted(m for m in graph.modules if m == root or m.startswith(root + ".")):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported == importer or not imported.startswith(root):
                    continue
                back = graph.find_shortest_chain(importer=imported, imported=importer)
                if back and frozenset(back) not in seen:
                    seen.add(frozenset(back))
                    cycles.append([importer, *back])
        return ContractCheck(kept=not cycles, warnings=None, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(" -> ".join(cycle))
            output.new_line()
