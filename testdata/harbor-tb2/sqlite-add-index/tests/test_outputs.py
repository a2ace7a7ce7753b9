import sqlite3
from pathlib import Path


def test_plan_uses_index():
    db = sqlite3.connect("/app/shop.db")
    plan = db.execute("EXPLAIN QUERY PLAN " + Path("/app/query.sql").read_text()).fetchall()
    assert any("USING INDEX" in row[-1] or "USING COVERING INDEX" in row[-1] for row in plan)


def test_rows_kept():
    db = sqlite3.connect("/app/shop.db")
    assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 5000
