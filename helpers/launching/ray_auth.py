"""The token that protects the Ray clusters :func:`~helpers.launching.ray_cluster.init_ray` starts (04).

The nodes of a cluster listen on the machine's IP; with Ray's token authentication, every node and
this driver share one secret (``RAY_AUTH_MODE=token``, the secret in ``RAY_AUTH_TOKEN``), and Ray
refuses whoever does not send it. ``init_ray`` sets both (:func:`use_token`) where the reader has
not, when it is called: importing the helpers writes no environment. It refuses to start a cluster
that the token would not protect (:func:`token_auth_refusal`).
"""
from __future__ import annotations

import os
import secrets

TOKEN_AUTH_MIN_RAY = "2.52.0"  # token auth came in Ray 2.52.0 (docs.ray.io/en/latest/ray-security/token-auth.html)


def use_token() -> None:
    """Set ``RAY_AUTH_MODE=token`` and a fresh secret in ``RAY_AUTH_TOKEN``, unless already set (04).

    The secret is kept for the kernel's life (a cluster started again uses the same one), and Ray's
    processes inherit it. Ray reads the mode into its config when it is imported, so ``init_ray``
    calls this before it imports Ray, and tells a Ray imported earlier to read it again
    (:func:`reread_ray_config`).
    """
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    if not os.environ.get("RAY_AUTH_TOKEN") and not os.environ.get("RAY_AUTH_TOKEN_PATH"):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def reread_ray_config() -> None:
    """Have a Ray imported before :func:`use_token` read ``RAY_AUTH_MODE`` again, if it read another mode (04).

    As Ray does itself when it turns token authentication on (``_enable_token_auth`` in
    ``ray/_private/authentication/authentication_token_setup.py``). Call it only while Ray is not running.
    """
    try:
        from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, Config, get_authentication_mode
    except ImportError:  # a Ray without token authentication, or whose internals moved: token_auth_refusal says so
        return
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" and get_authentication_mode() != AuthenticationMode.TOKEN:
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def token_auth_refusal() -> str | None:
    """Why a cluster ``init_ray`` starts would not be protected by the token, or ``None`` (04): a Ray older
    than ``TOKEN_AUTH_MIN_RAY``, ``RAY_AUTH_MODE`` other than ``token``, or a Ray that read its config
    without the mode and could not read it again (this kernel, the driver, would not send the token)."""
    import ray
    from packaging.version import Version

    if Version(ray.__version__) < Version(TOKEN_AUTH_MIN_RAY):
        return (f"Ray {ray.__version__} has no token authentication (it came in Ray {TOKEN_AUTH_MIN_RAY}), so the "
                "nodes would accept any client that reaches this machine's IP; upgrade with "
                f"pip install -U 'ray[tune]>={TOKEN_AUTH_MIN_RAY}', then restart the kernel")
    mode = os.environ.get("RAY_AUTH_MODE", "")
    if mode.lower() != "token":
        return (f"RAY_AUTH_MODE is {mode!r}, so the nodes would accept any client that reaches this machine's IP; "
                "unset it (the course sets 'token') or set it to 'token', then restart the kernel")
    try:
        from ray._raylet import AuthenticationMode, get_authentication_mode
    except ImportError:  # a Ray whose internals moved: the checks above are all that can be made
        return None
    if get_authentication_mode() != AuthenticationMode.TOKEN:
        return ("ray was imported before init_ray set RAY_AUTH_MODE=token and could not be made to read its settings "
                "again, so this kernel's Ray cannot join a cluster protected by a token; restart the kernel and call "
                "init_ray before importing ray")
    return None
