import subprocess
from pathlib import Path


def test_make_builds():
    subprocess.run(["make", "-C", "/app/calc", "clean"], check=False)
    subprocess.run(["make", "-C", "/app/calc"], check=True)
    assert Path("/app/calc/calc").is_file()


def test_make_check():
    subprocess.run(["make", "-C", "/app/calc", "check"], check=True)


def test_sources_unchanged():
    assert "return a + b;" in Path("/app/calc/add.c").read_text()
