"""The currency example (examples/currency), as its README runs it: sources loaded from its CSV files with `mv
load`, `mv refresh`, then rates that arrive late and a refresh again. Its temporal join, interval join and the
aggregate over them are planned incremental and bounded where they should be; every view equals its SQL over
the inputs at the versions it records, and a late rate moves exactly the orders of its time."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

from mvengine.cli.main import main
from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import view_tables
from mvengine.storage.api import read_table
from tests.spark.test_refresh_differential import check_view

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "currency"


def _eur(spark, catalog) -> dict[int, Decimal]:
    snapshot = read_table(spark, view_tables(catalog.plans["orders_in_eur"], {}).snapshot)
    return {row["id"]: row["amount_eur"] for row in snapshot.collect()}


def test_the_currency_example_follows_its_rates_as_of_each_order(spark, tmp_path):
    root = tmp_path / "currency"
    shutil.copytree(EXAMPLE, root)
    catalog = load_catalog(load_config(root))
    assert {n: p.strategy for n, p in catalog.plans.items()} == {n: "incremental" for n in catalog.plans}
    assert "temporal join" in catalog.plans["orders_in_eur"].state
    assert "interval join" in catalog.plans["paid_within_hour"].state
    mv = ["--project", str(root)]
    for source in ("rates", "orders", "payments"):
        assert main([*mv, "load", source, str(root / "data" / f"{source}.csv")]) == 0
    assert main([*mv, "refresh"]) == 0
    for name in catalog.plans:
        check_view(spark, catalog, name)
    # USD 0.91 from 09:00, 0.92 from 11:00; GBP 1.16, then 1.15 from 12:00; no CHF rate yet.
    before = _eur(spark, catalog)
    assert before == {
        1: Decimal("91.000000"),
        2: Decimal("46.400000"),
        3: Decimal("230.000000"),
        4: Decimal("80.000000"),
        5: Decimal("17.825000"),
    }
    paid = read_table(spark, view_tables(catalog.plans["paid_within_hour"], {}).snapshot)
    assert sorted(r["payment_id"] for r in paid.collect()) == [1, 3, 4]  # payment 2 came 90 minutes late
    # A USD rate dated 10:00 and a CHF rate dated 12:00 arrive after the orders of their times.
    assert main([*mv, "load", "rates", str(root / "data" / "late_rates.csv")]) == 0
    assert main([*mv, "refresh"]) == 0
    for name in catalog.plans:
        check_view(spark, catalog, name)
    after = _eur(spark, catalog)
    assert after == {**before, 1: Decimal("91.500000"), 6: Decimal("74.900000")}
