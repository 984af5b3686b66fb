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

from tests.conftest import stop_process

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
    # Node loads the provider's modules from a fresh npm install: on a
    # loaded 2-core machine (CI's three legs) that took over 30 s once. Twice
    # in CI a provider printed its start-up warning and then neither listened
    # nor exited for 90 s; a second start on the same port is what a person
    # would try, and the log of each attempt goes into the error.
    attempts: list[str] = []
    process = None
    for _ in range(2):
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [node, str(HERE / "provider.mjs"), json.dumps(config)], cwd=HERE, stdout=log, stderr=subprocess.STDOUT
            )
        if _answers(process, issuer, deadline=time.monotonic() + 60):
            break
        attempts.append(f"{_state(process)}\n{log_path.read_text(errors='replace')}")
        stop_process(process, timeout=10)
    else:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError("the OpenID provider did not start:\n" + "\n---\n".join(attempts))
    try:
        yield Provider(issuer, log_path)
    finally:
        stop_process(process, timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _answers(process: subprocess.Popen[bytes], issuer: str, *, deadline: float) -> bool:
    """Whether the provider answers its discovery document before ``deadline``
    (False as soon as it exits)."""
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1).status_code == 200:
                return True
        time.sleep(0.05)
    return False


def _state(process: subprocess.Popen[bytes]) -> str:
    """What a provider that did not answer was doing, for the error."""
    if process.poll() is not None:
        return f"exited with {process.returncode}"
    proc = Path(f"/proc/{process.pid}")
    wchan = (proc / "wchan").read_text() if (proc / "wchan").exists() else "?"
    state = next((line for line in (proc / "status").read_text().splitlines() if line.startswith("State:")), "?")
    return f"still running ({state}, waiting in {wchan or 'nothing'})"
