"""Lab nights stored in a real PostgreSQL server (the store tests' temporary
cluster): each result is written as it arrives, the next night is judged against
it, and a fresh connection reads both nights back."""

from __future__ import annotations

import pytest

from tests.integration.test_lab import LAB, _night, double  # noqa: F401  (fixture)
from tests.integration.test_store_postgres import _cluster

pytestmark = pytest.mark.slow


def test_nights_go_to_postgresql_and_are_judged_from_it(double, lenet5_workspace, tmp_path):  # noqa: F811
    from deploytool.lab.labfile import load_lab
    from deploytool.store import SqlAlchemyStore

    ws, *_ = lenet5_workspace
    (tmp_path / "lab.toml").write_text(LAB)
    lab = load_lab(tmp_path / "lab.toml")
    with _cluster() as (url, _):
        store = SqlAlchemyStore(url)
        first = _night(lab, ws, store, "n1")
        (cell,) = first.judged  # measured and passing: the night the next one is judged against
        assert cell.result.verdict == "pass" and not first.alerts, (cell.result.status, cell.result.reason)
        double["slower"] = 1.3
        second = _night(lab, ws, store, "n2")
        # judged against the first night, read back from PostgreSQL
        assert len(second.alerts) == 1, [(j.result.status, j.result.reason, j.changes, j.result.notes) for j in second.judged]
        (j,) = second.alerts
        assert j.previous_night == "lab-t-n1" and any(c.metric == "latency" for c in j.changes if c.alert)
        fresh = SqlAlchemyStore(url)
        nights = {r.run_id: r.status for r in fresh.list_runs(limit=100) if r.model == "lab:t"}
        assert nights == {"lab-t-n1": "complete", "lab-t-n2": "complete"}
        (row,) = fresh.results_for("lab-t-n2")
        assert row.status == "measured" and row.lab.worker and row.lab.host
