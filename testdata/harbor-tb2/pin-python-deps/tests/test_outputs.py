import re
import subprocess
from pathlib import Path


def test_requirement_pinned():
    lines = [l.strip() for l in Path("/app/requirements.txt").read_text().splitlines() if l.strip()]
    assert any(re.fullmatch(r"tabulate==[0-9.]+", l) for l in lines)


def test_report_runs():
    out = subprocess.run(["python3", "/app/report.py"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "report ok"
