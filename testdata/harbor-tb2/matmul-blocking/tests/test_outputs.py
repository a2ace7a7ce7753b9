import subprocess
import time
from pathlib import Path


def build(src, out):
    subprocess.run(["gcc", "-O2", "-o", out, src], check=True)


def best_of(binary, n=3):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([binary], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def test_output_unchanged():
    build("/app/matmul.c", "/tmp/candidate")
    out = subprocess.run(["/tmp/candidate"], capture_output=True, text=True, check=True).stdout
    assert out == Path("/opt/reference.txt").read_text()


def test_no_blas():
    assert "cblas" not in Path("/app/matmul.c").read_text()


def test_twice_as_fast():
    build("/app/matmul.c", "/tmp/candidate")
    assert best_of("/tmp/candidate") * 2 <= best_of("/app/matmul-ref")
