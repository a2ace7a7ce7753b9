import subprocess
from pathlib import Path

POLICY = Path("/etc/logrotate.d/app")


def test_policy_exists():
    assert POLICY.is_file()


def test_policy_directives():
    text = POLICY.read_text()
    for word in ("daily", "rotate 7", "compress", "missingok", "/var/log/app/"):
        assert word in text, word


def test_logrotate_accepts_it():
    subprocess.run(["logrotate", "--debug", str(POLICY)], check=True, capture_output=True)
