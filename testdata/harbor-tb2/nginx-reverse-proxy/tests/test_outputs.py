import subprocess


def curl(url):
    return subprocess.run(["curl", "-fsS", url], capture_output=True, text=True, check=True).stdout


def test_config_valid():
    subprocess.run(["nginx", "-t"], check=True)


def test_static_root():
    assert "fixture" in curl("http://localhost/")


def test_api_proxied():
    assert curl("http://localhost/api/").strip() == "backend ok"
