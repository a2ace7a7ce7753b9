import os
import subprocess

CONFIG = os.environ.get("SSHD_CONFIG", "/etc/ssh/sshd_config")


def effective():
    out = subprocess.run(["sshd", "-T", "-f", CONFIG], capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def test_config_valid():
    subprocess.run(["sshd", "-t", "-f", CONFIG], check=True)


def test_settings():
    cfg = effective()
    assert cfg["permitrootlogin"] == "no"
    assert cfg["passwordauthentication"] == "no"
    assert cfg["allowusers"] == "deploy"
    assert cfg["maxauthtries"] == "3"
