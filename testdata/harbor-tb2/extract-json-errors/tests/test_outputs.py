from pathlib import Path


def test_errors_extracted():
    want = [l for l in Path("/app/events.jsonl").read_text().splitlines() if '"level": "error"' in l]
    got = Path("/app/errors.jsonl").read_text().splitlines()
    assert got == want
