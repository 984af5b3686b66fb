"""Queen's JWTs on the API (``JWT_*``, ``domain/identity/jwt.py``), beside our own tokens.

Each algorithm family (HS, RS through a PEM and through a JWKS whose key
rotates, EdDSA), each claim rule with the clock skew, each level (a
role set: write-only pushes and is refused a pop), the refusals in our
envelope with Queen's messages, and the start-up refusals.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt as pyjwt
import pytest
import time_machine
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from django.core.management import call_command
from django.test import Client, override_settings
from jwt.algorithms import OKPAlgorithm, RSAAlgorithm

from queenadmin.domain import identity, tokens
from queenadmin.domain.identity.jwks import Jwks

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("short_connections")]

SECRET = "queen-jwt-tests-secret-of-at-least-64-bytes-for-hs512-keys-0123456789"
HS = {"QUEENADMIN_JWT_ENABLED": True, "QUEENADMIN_JWT_SECRET": SECRET, "QUEENADMIN_JWT_ALGORITHM": "HS256"}


def pem_of(private: Any) -> str:
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@pytest.fixture(scope="module")
def rsa_keys() -> list[Any]:
    return [rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2)]


@pytest.fixture(scope="module")
def ed_key() -> Any:
    return ed25519.Ed25519PrivateKey.generate()


def token(
    claims: dict[str, Any] | None = None,
    *,
    key: Any = SECRET,
    alg: str | None = None,
    kid: str | None = None,
    role: str | None = "read-write",
    **extra: Any,
) -> str:
    now = int(time.time())
    body: dict[str, Any] = {"sub": "alice", "iat": now, "exp": now + 600}
    if role is not None:
        body["role"] = role
    body.update(claims or {})
    body.update(extra)
    body = {k: v for k, v in body.items() if v is not None}
    if alg is None:
        alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "EdDSA" if not isinstance(key, str) else "HS256"
    return pyjwt.encode(body, key, algorithm=alg, headers={"kid": kid} if kid else None)


def call(method: str, path: str, bearer: str | None, body: Any = None) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {bearer}"} if bearer is not None else {}
    client = Client(**headers)
    if method == "GET":
        return client.get(path)
    if method == "DELETE":
        return client.delete(path)
    return client.post(path, data=json.dumps(body), content_type="application/json")


def queues(bearer: str | None) -> Any:
    return call("GET", "/api/v1/resources/queues", bearer)


def refused(answer: Any, message: str, status: int = 401) -> None:
    assert answer.status_code == status, answer.content
    code = "unauthorized" if status == 401 else "forbidden"
    assert answer.json() == {"error": code, "code": code, "detail": message}


# -- HS -------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512"])
def test_each_hmac_algorithm_is_accepted_when_configured(alg):
    """JWT_ALGORITHM=HSxxx takes tokens of exactly that alg."""
    with override_settings(**{**HS, "QUEENADMIN_JWT_ALGORITHM": alg}):
        assert queues(token(alg=alg)).status_code == 200
        other = "HS512" if alg != "HS512" else "HS256"
        refused(queues(token(alg=other)), "Unsupported token algorithm")


@override_settings(**HS)
def test_a_wrong_signature_a_bad_header_and_no_token_are_refused_with_queens_messages():
    refused(queues(token(key="another-secret-of-at-least-thirty-two-bytes-long")), "Invalid token signature")
    refused(queues("eyJub3Q.a.jwt"), "Bad token header")
    refused(queues(None), "Authentication required")
    unsigned = pyjwt.encode({"sub": "x", "role": "admin"}, None, algorithm="none")
    refused(queues(unsigned), "Unsupported token algorithm")


@override_settings(**HS)
def test_our_own_tokens_keep_working_beside_jwts():
    """A ``qa_`` token is ours whatever JWTs say; an unknown one is our 401."""
    mine = tokens.token_create(by=tokens.HOST, name="beside-jwts", scope="read")
    assert queues(mine).status_code == 200
    assert identity.looks_like_jwt(token())
    assert not identity.looks_like_jwt(mine)
    assert queues("qa_unknown").json()["detail"] == "A valid bearer token is required."


def test_jwts_are_not_read_when_jwt_is_off():
    """Without JWT_ENABLED a JWT is an unknown bearer token."""
    with override_settings(QUEENADMIN_JWT_SECRET=SECRET):
        assert queues(token()).status_code == 401


# -- RS and EdDSA through a PEM -----------------------------------------------------------


def test_rs256_takes_rs256_384_and_512_through_a_pem(rsa_keys):
    with override_settings(
        QUEENADMIN_JWT_ENABLED=True, QUEENADMIN_JWT_ALGORITHM="RS256", QUEENADMIN_JWT_PUBLIC_KEY=pem_of(rsa_keys[0])
    ):
        for alg in ("RS256", "RS384", "RS512"):
            assert queues(token(key=rsa_keys[0], alg=alg)).status_code == 200, alg
        refused(queues(token(key=rsa_keys[1], alg="RS256")), "Invalid token signature")
        refused(queues(token()), "Unsupported token algorithm")


def test_rs384_takes_only_rs384(rsa_keys):
    with override_settings(
        QUEENADMIN_JWT_ENABLED=True, QUEENADMIN_JWT_ALGORITHM="RS384", QUEENADMIN_JWT_PUBLIC_KEY=pem_of(rsa_keys[0])
    ):
        assert queues(token(key=rsa_keys[0], alg="RS384")).status_code == 200
        refused(queues(token(key=rsa_keys[0], alg="RS256")), "Unsupported token algorithm")


def test_eddsa_through_a_pem(ed_key, rsa_keys):
    with override_settings(
        QUEENADMIN_JWT_ENABLED=True, QUEENADMIN_JWT_ALGORITHM="EdDSA", QUEENADMIN_JWT_PUBLIC_KEY=pem_of(ed_key)
    ):
        assert queues(token(key=ed_key, alg="EdDSA")).status_code == 200
        refused(queues(token(key=ed25519.Ed25519PrivateKey.generate(), alg="EdDSA")), "Invalid token signature")


def test_auto_takes_every_family(ed_key, rsa_keys):
    """``auto``: HS with the secret, RS and EdDSA with their keys from the JWKS."""
    document = {"keys": [jwk(rsa_keys[0], "r1"), jwk(ed_key, "e1")]}
    with (
        jwks_server(document) as (url, _hits),
        override_settings(
            QUEENADMIN_JWT_ENABLED=True,
            QUEENADMIN_JWT_ALGORITHM="auto",
            QUEENADMIN_JWT_SECRET=SECRET,
            QUEENADMIN_JWT_JWKS_URL=url,
        ),
    ):
        assert queues(token(alg="HS384")).status_code == 200
        assert queues(token(key=rsa_keys[0], alg="RS512", kid="r1")).status_code == 200
        assert queues(token(key=ed_key, alg="EdDSA", kid="e1")).status_code == 200
        # An Ed25519 key does not verify an RS token of its kid.
        refused(queues(token(key=rsa_keys[0], alg="RS256", kid="e1")), "Invalid token signature")


# -- JWKS -------------------------------------------------------------------------------


def jwk(private: Any, kid: str) -> dict[str, Any]:
    algorithm = OKPAlgorithm if isinstance(private, ed25519.Ed25519PrivateKey) else RSAAlgorithm
    entry: dict[str, Any] = algorithm.to_jwk(private.public_key(), as_dict=True)
    entry["kid"] = kid
    return entry


class _Jwks(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        body = json.dumps(self.server.document).encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class jwks_server:
    """A JWKS document served on loopback; ``server.document`` may change."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Jwks)
        self.server.document = document  # type: ignore[attr-defined]
        self.server.hits = []  # type: ignore[attr-defined]

    def __enter__(self) -> tuple[str, list[str]]:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_port}/jwks.json", self.server.hits  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def test_rs_through_a_jwks_whose_key_rotates(rsa_keys):
    """A new kid fetches the document again (once per 5 s at most); an unknown one is 401 Unknown key ID."""
    clock = [1000.0]
    server = jwks_server({"keys": [jwk(rsa_keys[0], "k1")]})
    with (
        server as (url, hits),
        override_settings(QUEENADMIN_JWT_ENABLED=True, QUEENADMIN_JWT_ALGORITHM="RS256", QUEENADMIN_JWT_JWKS_URL=url),
    ):
        # The JWKS object reads the clock it was made with.
        identity.jwt_config().jwks._clock = lambda: clock[0]  # type: ignore[union-attr]
        assert queues(token(key=rsa_keys[0], kid="k1")).status_code == 200
        assert len(hits) == 1
        # The provider rotates: k2 in, k1 out.
        server.server.document = {"keys": [jwk(rsa_keys[1], "k2")]}  # type: ignore[attr-defined]
        clock[0] += 6
        assert queues(token(key=rsa_keys[1], kid="k2", sub="bob")).status_code == 200
        assert len(hits) == 2
        # An unknown kid: one more fetch, then refused; again within 5 s: no fetch.
        clock[0] += 6
        refused(queues(token(key=rsa_keys[1], kid="k9", sub="c1")), "Unknown key ID")
        assert len(hits) == 3
        clock[0] += 1
        refused(queues(token(key=rsa_keys[1], kid="k8", sub="c2")), "Unknown key ID")
        assert len(hits) == 3
        # A new token signed with the rotated-out k1: the document has it no more.
        refused(queues(token(key=rsa_keys[0], kid="k1", sub="d")), "Unknown key ID")


def test_the_jwks_is_fetched_again_after_its_refresh_interval(rsa_keys):
    clock = [0.0]
    fetched: list[str] = []

    def fetch(url: str, timeout_ms: int) -> dict[str, Any]:
        fetched.append(url)
        return {"keys": [jwk(rsa_keys[0], "k1"), {"kty": "EC", "kid": "skipped"}]}

    keys = Jwks("http://idp.invalid/jwks", refresh_seconds=60, timeout_ms=100, fetch=fetch, clock=lambda: clock[0])
    assert keys.key("k1") is not None
    assert keys.key("skipped") is None
    assert len(fetched) == 1
    clock[0] = 59
    keys.key("k1")
    assert len(fetched) == 1
    clock[0] = 61
    keys.key("k1")
    assert len(fetched) == 2


def test_a_failed_jwks_fetch_keeps_the_keys_it_had(rsa_keys):
    clock = [0.0]
    answers: list[Any] = [{"keys": [jwk(rsa_keys[0], "k1")]}, OSError("down")]

    def fetch(url: str, timeout_ms: int) -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    keys = Jwks("http://idp.invalid/jwks", refresh_seconds=10, timeout_ms=100, fetch=fetch, clock=lambda: clock[0])
    assert keys.prefetch() is None
    clock[0] = 20
    assert keys.key("k1") is not None


def test_eddsa_through_a_jwks(ed_key):
    with (
        jwks_server({"keys": [jwk(ed_key, "ed")]}) as (url, _hits),
        override_settings(QUEENADMIN_JWT_ENABLED=True, QUEENADMIN_JWT_ALGORITHM="EdDSA", QUEENADMIN_JWT_JWKS_URL=url),
    ):
        assert queues(token(key=ed_key, alg="EdDSA", kid="ed")).status_code == 200


# -- claims -------------------------------------------------------------------------------


@override_settings(**HS, QUEENADMIN_JWT_CLOCK_SKEW=30)
def test_exp_nbf_and_iat_with_the_clock_skew():
    now = int(time.time())
    assert queues(token(exp=now - 10, sub="exp-in-skew")).status_code == 200
    refused(queues(token(exp=now - 60, sub="exp")), "Token has expired")
    assert queues(token(nbf=now + 10, sub="nbf-in-skew")).status_code == 200
    refused(queues(token(nbf=now + 60, sub="nbf")), "Token not yet valid")
    assert queues(token(iat=now + 10, sub="iat-in-skew")).status_code == 200
    refused(queues(token(iat=now + 60, sub="iat")), "Token issued in the future")
    # No exp: never expires (Queen's foot-gun, kept).
    assert queues(token(exp=None, sub="forever")).status_code == 200


@override_settings(**HS, QUEENADMIN_JWT_CLOCK_SKEW=0)
def test_a_skew_of_zero_refuses_a_token_a_second_past_exp():
    refused(queues(token(exp=int(time.time()) - 2)), "Token has expired")


@override_settings(**HS, QUEENADMIN_JWT_ISSUER="https://idp.example", QUEENADMIN_JWT_AUDIENCE="queen")
def test_iss_and_aud_are_checked_when_set():
    assert queues(token(iss="https://idp.example", aud="queen")).status_code == 200
    assert queues(token(iss="https://idp.example", aud=["other", "queen"], sub="arr")).status_code == 200
    refused(queues(token(iss="https://evil.example", aud="queen")), "Invalid token issuer")
    refused(queues(token(aud="queen", sub="no-iss")), "Invalid token issuer")
    refused(queues(token(iss="https://idp.example", aud=["other"])), "Invalid token audience")
    refused(queues(token(iss="https://idp.example", sub="no-aud")), "Invalid token audience")


@override_settings(**HS)
def test_iss_and_aud_are_not_checked_when_unset():
    assert queues(token(iss="anyone", aud="anything")).status_code == 200


def test_a_verified_token_is_refused_once_it_expires():
    """The cache of verified tokens holds a token no longer than its exp (with the skew)."""
    with override_settings(**HS, QUEENADMIN_JWT_CLOCK_SKEW=0):
        now = time.time()
        bearer = token(exp=int(now) + 2)
        assert queues(bearer).status_code == 200
        with time_machine.travel(now + 5, tick=False):
            refused(queues(bearer), "Token has expired")


# -- levels -------------------------------------------------------------------------------


def push_body(queue: str) -> dict[str, Any]:
    return {"items": [{"queue": queue, "partition": "Default", "payload": {"n": 1}}]}


@override_settings(**HS)
def test_write_only_pushes_schedules_and_is_refused_every_read_and_pop():
    writer = token(role="write-only", sub="pusher")
    assert call("POST", "/api/v1/push", writer, push_body("jwt-wo")).status_code == 201
    timer = {
        "operations": [
            {"op": "schedule", "queue": "jwt-wo", "timerKey": "t1", "txn": "x", "delayMs": 60000, "payload": "e30="}
        ]
    }
    scheduled = call("POST", "/api/v1/timers", writer, timer)
    assert scheduled.status_code == 200, scheduled.content
    refused(call("GET", "/api/v1/pop/queue/jwt-wo?wait=false", writer), "Insufficient permissions", 403)
    refused(queues(writer), "Insufficient permissions", 403)
    refused(call("POST", "/api/v1/configure", writer, {"queue": "jwt-wo"}), "Insufficient permissions", 403)
    refused(call("POST", "/api/v1/kv", writer, [{"op": "get", "ns": "n", "key": "k"}]), "Insufficient permissions", 403)


@override_settings(**HS)
def test_read_only_reads_and_may_not_push_or_pop():
    reader = token(role="read-only", sub="reader")
    assert queues(reader).status_code == 200
    refused(call("POST", "/api/v1/push", reader, push_body("jwt-ro")), "Insufficient permissions", 403)
    refused(call("GET", "/api/v1/pop/queue/jwt-ro?wait=false", reader), "Insufficient permissions", 403)


@pytest.mark.django_db(transaction=True)
@override_settings(**HS)
def test_read_write_pushes_and_pops_and_only_admin_deletes():
    rw, admin = token(role="read-write", sub="rw"), token(role="admin", sub="root")
    assert call("POST", "/api/v1/push", rw, push_body("jwt-rw")).status_code == 201
    assert call("GET", "/api/v1/pop/queue/jwt-rw?wait=false", rw).status_code == 200
    refused(call("DELETE", "/api/v1/resources/queues/jwt-rw", rw), "Insufficient permissions", 403)
    assert call("DELETE", "/api/v1/resources/queues/jwt-rw", admin).status_code == 200


@override_settings(**HS)
def test_a_role_set_passes_each_of_its_levels():
    """``roles: [read-only, write-only]`` reads and pushes, and still may not pop."""
    both = token(role=None, roles=["read-only", "write-only"], sub="both")
    assert queues(both).status_code == 200
    assert call("POST", "/api/v1/push", both, push_body("jwt-both")).status_code == 201
    refused(call("GET", "/api/v1/pop/queue/jwt-both?wait=false", both), "Insufficient permissions", 403)
    refused(queues(token(role="nobody", sub="none")), "Insufficient permissions", 403)
    refused(queues(token(role=None, sub="none2")), "Insufficient permissions", 403)


@override_settings(
    **HS,
    QUEENADMIN_JWT_ROLES_CLAIM="queen_role",
    QUEENADMIN_JWT_ROLE_READ_ONLY="viewer",
)
def test_the_role_claim_and_values_are_configurable():
    assert queues(token(role=None, queen_role="viewer")).status_code == 200
    refused(queues(token(role="read-only", sub="default-name")), "Insufficient permissions", 403)


@override_settings(**HS, QUEENADMIN_JWT_SKIP_PATHS="/api/v1/resources/,/api/v1/status")
def test_skip_paths_need_no_token():
    assert queues(None).status_code == 200
    assert call("GET", "/api/v1/status", None).status_code == 200
    refused(call("GET", "/api/v1/status/queues", None), "Authentication required")


# -- start-up refusals ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "refusal"),
    [
        ({"QUEENADMIN_JWT_ALGORITHM": "HS999"}, "JWT_ALGORITHM='HS999' is not one of"),
        ({"QUEENADMIN_JWT_ALGORITHM": "HS384"}, "JWT_ALGORITHM=HS384 needs JWT_SECRET"),
        ({"QUEENADMIN_JWT_ALGORITHM": "auto"}, "JWT_ALGORITHM=auto needs key material"),
        ({"QUEENADMIN_JWT_ALGORITHM": "RS256"}, "JWT_ALGORITHM=RS256 needs JWT_PUBLIC_KEY (a PEM) or JWT_JWKS_URL"),
        ({"QUEENADMIN_JWT_ALGORITHM": "EdDSA"}, "JWT_ALGORITHM=EdDSA needs JWT_PUBLIC_KEY (a PEM) or JWT_JWKS_URL"),
        (
            {"QUEENADMIN_JWT_ALGORITHM": "RS256", "QUEENADMIN_JWT_PUBLIC_KEY": "not a pem"},
            "JWT_PUBLIC_KEY is not a PEM",
        ),
    ],
)
def test_start_up_refuses_what_queen_refuses(configured, refusal):
    with override_settings(QUEENADMIN_JWT_ENABLED=True, **configured):
        refused_text = identity.jwt_start_refusal()
        assert refused_text is not None
        assert refused_text.startswith(refusal), refused_text
        with pytest.raises(SystemExit):
            call_command("serve", "--host", "127.0.0.1", "--port", "0", "--no-migrate")


def test_start_up_takes_what_queen_takes(rsa_keys):
    with override_settings(QUEENADMIN_JWT_ENABLED=True, QUEENADMIN_JWT_ALGORITHM="RS512"):
        assert identity.jwt_start_refusal() is not None
    for configured in (
        HS,
        {"QUEENADMIN_JWT_ALGORITHM": "auto", "QUEENADMIN_JWT_SECRET": SECRET},
        {"QUEENADMIN_JWT_ALGORITHM": "RS512", "QUEENADMIN_JWT_PUBLIC_KEY": pem_of(rsa_keys[0])},
        # A JWKS that cannot be fetched yet is no refusal: the first token fetches again.
        {"QUEENADMIN_JWT_ALGORITHM": "EdDSA", "QUEENADMIN_JWT_JWKS_URL": "http://127.0.0.1:9/jwks.json"},
    ):
        with override_settings(**{"QUEENADMIN_JWT_ENABLED": True, **configured}):
            assert identity.jwt_start_refusal() is None
    with override_settings(QUEENADMIN_JWT_ALGORITHM="nonsense"):
        assert identity.jwt_start_refusal() is None  # JWTs off: nothing to refuse


def test_the_environment_names_are_queens_own():
    """``JWT_SECRET`` and friends, without the QUEENADMIN_ prefix, reach the
    settings (``settings.py`` reads the environment through this list)."""
    from queenadmin import conf

    found = conf.read_environ(
        {"JWT_ENABLED": "true", "JWT_SECRET": "s3cret", "JWT_CLOCK_SKEW": "5", "JWT_ROLE_WRITE_ONLY": "producer"}
    )
    assert found == {
        "JWT_ENABLED": True,
        "JWT_SECRET": "s3cret",
        "JWT_CLOCK_SKEW": 5,
        "JWT_ROLE_WRITE_ONLY": "producer",
    }
    assert all(conf.app_or_hook(name) for name in found)
    # The prefixed spelling is not Queen's and is not read.
    assert conf.read_environ({"QUEENADMIN_JWT_ENABLED": "true"}) == {}
