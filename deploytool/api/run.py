"""`Run`: a migrate run as the Python API hands it back — its typed rows (deploytool.report.table.Row), the failing
ones, one row by its fields, the findings it touched, its report, a DataFrame and the table Jupyter shows. Made
from what `deploytool.migrate.migrate` returned, or from the store (`load_run`); it never measures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from deploytool.errors import UnknownOption
from deploytool.report.table import Row, flat, html_table, row_of
from deploytool.result import Result
from deploytool.store import Finding, open_store
from deploytool.workspace import Workspace


@dataclass(frozen=True, eq=False)
class Run:
    """One migrate run: `model` as its request names it (a zoo name, or the path of the file that ran: a model
    object's saved file), `rows` in the order of its matrix, `report_path` its report.html (None when no report
    was written), `workspace` and `db` where it is kept. `results` holds the full `deploytool.result.Result`
    behind each row, for what a Row does not show (not part of the stable API)."""

    run_id: str
    model: str
    rows: tuple[Row, ...]
    report_path: Path | None
    workspace: Path
    db: str | None = None
    results: tuple[Result, ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, run_id: str, model: str, results: list[Result], report_path: Path | None, ws: Workspace,
           db: str | None) -> "Run":
        return cls(run_id, model, tuple(row_of(r) for r in results), report_path, ws.root, db, tuple(results))

    # -- rows ---------------------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def failing(self) -> tuple[Row, ...]:
        """Rows whose verdict is fail or whose combination failed (conversion, runtime, device): the CLI's exit 1."""
        return tuple(r for r in self.rows if r.failing)

    @property
    def passed(self) -> bool:
        """No row failing and at least one measured."""
        return not self.failing and any(r.verdict is not None for r in self.rows)

    def row(self, label: str | None = None, **fields: Any) -> Row:
        """The one row with this label, or whose fields are these (`run.row(format="onnx", target="web")`);
        UnknownOption when none or several match, naming the rows there are."""
        unknown = [k for k in fields if k not in Row.__dataclass_fields__]
        if unknown:
            raise UnknownOption(f"run.row(): rows have no field {unknown[0]!r}; match on framework, format, "
                                "quantize, target, backend, device, runtime, status or verdict")
        found = [r for r in self.rows if (label is None or r.label == label) and r.matches(**fields)]
        if len(found) == 1:
            return found[0]
        asked = ", ".join([*([repr(label)] if label else []), *(f"{k}={v!r}" for k, v in fields.items())])
        what = "no row" if not found else f"{len(found)} rows"
        raise UnknownOption(f"{what} of run {self.run_id} match {asked}; its rows: "
                            + "; ".join(r.label for r in (found or self.rows)))

    # -- around the rows ------------------------------------------------------------------------------------------
    @property
    def findings(self) -> list[Finding]:
        """The distinct bugs (deploytool.store.Finding) this run's failing rows were counted in, from the store."""
        ws = Workspace.open(self.workspace, writable=False)
        return [f for f in open_store(self.db, ws.default_db_url).findings() if self.run_id in f.runs]

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame, one column per value of `deploytool.report.table.flat` (pandas is
        optional: installed, it is imported here)."""
        try:
            import pandas as pd
        except ImportError:
            raise UnknownOption("Run.to_pandas() needs pandas, which is not installed; `pip install pandas`, or "
                                "read run.rows") from None
        return pd.DataFrame([flat(r) for r in self.rows])

    def _repr_html_(self) -> str:
        failing = len(self.failing)
        caption = (f"run {self.run_id}: {len(self.rows)} rows, {failing} failing"
                   + (f" — report {self.report_path}" if self.report_path else ""))
        return html_table(self.rows, caption)

    def __repr__(self) -> str:
        return (f"<Run {self.run_id}: {len(self.rows)} rows, {len(self.failing)} failing; "
                f"report {self.report_path or 'not written'}>")
