import json
from pathlib import Path


def test_totals_file_exists():
    assert Path("/app/totals.json").is_file()


def test_totals_values():
    totals = json.loads(Path("/app/totals.json").read_text())
    assert totals == {"east": 42.0, "north": 140.0, "south": 90.35}


def test_regions_sorted():
    text = Path("/app/totals.json").read_text()
    assert list(json.loads(text)) == sorted(json.loads(text))
