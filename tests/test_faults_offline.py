"""The course offline (issue: nothing phones home): W&B's offline default makes no network call, and 'logged in' means
what wandb itself finds. Each test failed on the code before the fix it checks."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

from helpers import monitor as MO
from helpers.core import logger as LG


# --- network use when offline ------------------------------------------------------------------------------

_COUNT_NETWORK = """
import socket, sys
calls = []
_gai = socket.getaddrinfo
def spy(host, *a, **k):
    if host not in ("localhost", "127.0.0.1", "::1"):
        calls.append(host)
    return _gai(host, *a, **k)
socket.getaddrinfo = spy
from helpers.monitor import Monitor, wandb_mode
print("mode", wandb_mode())
with Monitor(sys.argv[1], config={"lr": 0.01}) as m:
    m.log({"a": 1.0}, 1)
import time; time.sleep(2)
print("lookups", calls)
"""


def test_the_offline_default_makes_no_network_call(tmp_path):
    """wandb's own processes included: every HTTP(S) request goes to a local proxy that counts them."""
    seen = []
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def count():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            seen.append(conn.recv(200).split(b"\r\n")[0])
            conn.close()

    threading.Thread(target=count, daemon=True).start()
    proxy = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_MODE", "WANDB_API_KEY", "NO_PROXY", "no_proxy")}
    env.update(HTTPS_PROXY=proxy, HTTP_PROXY=proxy, https_proxy=proxy, http_proxy=proxy,
               NETRC=str(tmp_path / "no-netrc"), HOME=str(tmp_path), WANDB_CONFIG_DIR=str(tmp_path / "cfg"))
    r = subprocess.run([sys.executable, "-c", _COUNT_NETWORK, str(tmp_path / "run")], env=env, capture_output=True,
                       text=True, timeout=180, cwd=tmp_path)
    server.close()
    assert r.returncode == 0, r.stderr[-2000:]
    assert "mode offline" in r.stdout and "lookups []" in r.stdout, r.stdout
    assert seen == [], f"requests sent while offline: {seen}"


def test_logged_in_means_what_wandb_itself_finds(tmp_path, monkeypatch):
    from wandb.sdk import wandb_setup

    host = wandb_setup.singleton().settings.base_url.split("://")[-1]
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine {host}\n  login user\n  password {'a' * 40}\n")
    netrc.chmod(0o600)
    for k in ("WANDB_MODE", "WANDB_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setattr(LG, "_OFFLINE_SET_HERE", False)
    assert MO.wandb_mode() == "online"
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert MO.wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")     # the reader's own choice wins
    assert MO.wandb_mode() == "disabled"
