import hashlib
from pathlib import Path


def test_recoverable_files_restored():
    for line in Path("/opt/expected.sha256").read_text().splitlines():
        digest, name = line.split()
        path = Path("/app/restored") / name
        assert path.is_file(), name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, name
