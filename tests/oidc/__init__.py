"""The OpenID provider the single sign-on tests sign in at.

panva's ``oidc-provider`` (npm, pinned by this folder's package-lock.json,
installed by ``.ci/install-system``), run as ``node provider.mjs``: a
certified provider with the static users of ``provider.mjs`` (``olga`` in
``queenadmin-operators``, ``vic`` in ``queenadmin-viewers``, ``mallory`` at a
domain no test allows), any password, one client. It starts in well under a
second; one serves a whole test module.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
CLIENT_ID = "queenadmin"
CLIENT_SECRET = "tests-only-client-secret"


def available() -> bool:
    """node, and this folder's npm packages."""
    return shutil.which("node") is not None and (HERE / "node_modules" / "oidc-provider").is_dir()


@dataclass(frozen=True)
class Provider:
    issuer: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def run_provider(*, port: int, redirect_uri: str, post_logout_redirect_uri: str) -> Iterator[Provider]:
    """The provider on ``127.0.0.1:port``, for a client whose callback is
    ``redirect_uri``; stopped at the end."""
    issuer = f"http://127.0.0.1:{port}"
    folder = Path(tempfile.mkdtemp(prefix="qa-oidc-"))
    log_path = folder / "provider.log"
    config = {
        "port": port,
        "redirectUri": redirect_uri,
        "postLogoutRedirectUri": post_logout_redirect_uri,
        "clientSecret": CLIENT_SECRET,
    }
    node = shutil.which("node")
    assert node is not None
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [node, str(HERE / "provider.mjs"), json.dumps(config)], cwd=HERE, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        # Node loads the provider's modules from a fresh npm install: on a
        # loaded 2-core machine (CI's three legs) that took over 30 s once.
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError("the OpenID provider exited:\n" + log_path.read_text())
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the OpenID provider did not start:\n" + log_path.read_text())
            time.sleep(0.05)
        yield Provider(issuer, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)
