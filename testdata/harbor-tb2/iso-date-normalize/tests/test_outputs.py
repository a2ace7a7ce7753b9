import subprocess
from pathlib import Path

WANT = """Met on 2025-03-14 and again on 2025-03-14.
The invoice is due 2025-03-14; version 1.2.3 is not a date.
"""


def test_output_file():
    assert Path("/app/letters.iso.txt").read_text() == WANT


def test_script_reproduces_it():
    out = subprocess.run(["python3", "/app/normalize.py"], capture_output=True, text=True, check=True).stdout
    assert out == WANT
