import subprocess

REPO = "/app/repo"


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout


def test_commit_on_main():
    assert "add notes" in git("log", "--format=%s", "main")


def test_file_restored():
    assert git("show", "main:notes.txt").strip() == "remember the milk"
