"""Pure parts of the HTTP layer: JWT verification (HS256 and a JWKS served over loopback), JWT
users in server/auth.py, the in-process quota, the knowledge-base owner rule, error bodies."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from langgraph_sdk import Auth

from server import auth as server_auth
from server import kb as kb_service
from server.errors import ApiError, error_response
from server.jwt_auth import JWTRejected, jwt_config, looks_like_jwt, verify_jwt
from tests.web_servers import LoopbackServer, Reply
from tools import quota
from tools.identity import ADMIN

SECRET = "unit-test-secret-0123456789abcdef0123"


@dataclass
class User:
    identity: str
    permissions: list[str] = field(default_factory=list)


def hs256(claims: dict, secret: str = SECRET) -> str:
    return jwt.encode({"exp": int(time.time()) + 600, **claims}, secret, algorithm="HS256")


@pytest.fixture
def jwt_env(monkeypatch):
    monkeypatch.setenv("AGENT_JWT_SECRET", SECRET)
    monkeypatch.setenv("AGENT_JWT_AUDIENCE", "engine")
    monkeypatch.delenv("AGENT_API_KEYS", raising=False)
    monkeypatch.setenv("AGENT_ADMIN_USERS", "root")


async def test_a_valid_jwt_names_its_user_by_the_configured_claim(jwt_env, monkeypatch):
    assert await verify_jwt(hs256({"sub": "alice", "aud": "engine"}), jwt_config()) == "alice"
    monkeypatch.setenv("AGENT_JWT_USER_CLAIM", "email")
    assert await verify_jwt(hs256({"sub": "1", "email": "a@x.org", "aud": "engine"}), jwt_config()) == "a@x.org"
    with pytest.raises(JWTRejected, match="user claim 'email'"):
        await verify_jwt(hs256({"sub": "1", "aud": "engine"}), jwt_config())


@pytest.mark.parametrize(
    "claims, secret, reason",
    [
        ({"sub": "a", "aud": "engine", "exp": int(time.time()) - 300}, SECRET, "expired"),
        ({"sub": "a", "aud": "engine"}, "wrong-secret-0123456789abcdef012345", "signature"),
        ({"sub": "a", "aud": "other"}, SECRET, "audience"),
        ({"sub": "a"}, SECRET, "aud"),
    ],
)
async def test_bad_jwts_are_rejected_with_a_reason(jwt_env, claims, secret, reason):
    with pytest.raises(JWTRejected, match=reason):
        await verify_jwt(hs256(claims, secret), jwt_config())


async def test_a_jwt_without_exp_is_rejected(jwt_env):
    unbounded = jwt.encode({"sub": "a", "aud": "engine"}, SECRET, algorithm="HS256")
    with pytest.raises(JWTRejected, match="exp"):
        await verify_jwt(unbounded, jwt_config())


async def test_jwks_signed_tokens_are_verified_with_the_providers_key(monkeypatch):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    with LoopbackServer(
        {
            "/jwks.json": Reply(
                body=json.dumps({"keys": [{**public_jwk, "kid": "k1", "use": "sig"}]}), content_type="application/json"
            )
        }
    ) as idp:
        monkeypatch.delenv("AGENT_JWT_SECRET", raising=False)
        monkeypatch.setenv("AGENT_JWT_JWKS_URL", idp.url("/jwks.json"))
        monkeypatch.setenv("AGENT_JWT_ISSUER", "https://idp.example")
        claims = {"sub": "carol", "iss": "https://idp.example", "exp": int(time.time()) + 60}
        good = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})
        assert await verify_jwt(good, jwt_config()) == "carol"
        forged = jwt.encode(claims, other, algorithm="RS256", headers={"kid": "k1"})
        with pytest.raises(JWTRejected, match="signature"):
            await verify_jwt(forged, jwt_config())
        wrong_issuer = jwt.encode({**claims, "iss": "https://evil"}, private, algorithm="RS256", headers={"kid": "k1"})
        with pytest.raises(JWTRejected, match="issuer"):
            await verify_jwt(wrong_issuer, jwt_config())


async def test_auth_accepts_jwt_users_beside_keys_and_refuses_bad_tokens(jwt_env, monkeypatch):
    monkeypatch.setenv("AGENT_API_KEYS", "bob=k-bob")
    assert await server_auth.authenticate(f"Bearer {hs256({'sub': 'alice', 'aud': 'engine'})}", None) == {
        "identity": "alice",
        "permissions": [],
    }
    assert (await server_auth.authenticate(None, {b"x-api-key": hs256({"sub": "root", "aud": "engine"}).encode()}))[
        "permissions"
    ] == [ADMIN]
    assert (await server_auth.authenticate("Bearer k-bob", None))["identity"] == "bob"
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.authenticate(f"Bearer {hs256({'sub': 'a', 'aud': 'engine', 'exp': 1})}", None)
    assert refused.value.status_code == 401 and "expired" in refused.value.detail


async def test_jwt_settings_alone_close_langgraph_dev(jwt_env, monkeypatch):
    monkeypatch.setenv("LANGSMITH_LANGGRAPH_API_VARIANT", "local_dev")
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.authenticate(None, None)
    assert refused.value.status_code == 401


def test_api_keys_never_look_like_jwts():
    assert looks_like_jwt(hs256({"sub": "a"}))
    assert not looks_like_jwt("key-alice-7f3c") and not looks_like_jwt("a..b")


async def test_quota_counts_per_user_and_kind_and_spares_administrators(monkeypatch):
    monkeypatch.setenv("WEB_QUOTA_REQUESTS", "2")
    monkeypatch.setenv("WEB_QUOTA_WINDOW", "86400")
    who = User(f"u{time.time_ns()}")
    await quota.charge(None, who, "web_search")
    await quota.charge(None, who, "web_search")
    with pytest.raises(quota.QuotaExceeded) as over:
        await quota.charge(None, who, "web_search")
    assert over.value.retry_after >= 1 and "at most 2 web_search calls" in str(over.value)
    await quota.charge(None, who, "web_read")  # its own budget
    for _ in range(5):
        await quota.charge(None, User("ops", [ADMIN]), "web_search")
        await quota.charge(None, None, "web_search")
    monkeypatch.setenv("WEB_QUOTA_REQUESTS", "0")
    await quota.charge(None, who, "web_search")  # 0 = unlimited


async def test_ingest_byte_budget_refuses_what_does_not_fit_without_counting_it(monkeypatch):
    monkeypatch.setenv("KB_INGEST_QUOTA_BYTES", "1000")
    monkeypatch.setenv("KB_INGEST_QUOTA_WINDOW", "86400")
    who = User(f"u{time.time_ns()}")
    await quota.charge_bytes(None, who, 600)
    with pytest.raises(quota.QuotaExceeded) as over:
        await quota.charge_bytes(None, who, 600)
    assert over.value.kind == "ingest_bytes" and "400 left" in str(over.value) and over.value.retry_after >= 1
    await quota.charge_bytes(None, who, 400)  # the refused 600 were not counted
    with pytest.raises(quota.QuotaExceeded, match="cannot be ingested|split it"):
        await quota.charge_bytes(None, User(f"v{time.time_ns()}"), 5000)
    await quota.charge_bytes(None, User("ops", [ADMIN]), 10**6)


async def test_model_utility_quota(monkeypatch):
    monkeypatch.setenv("UTILITY_QUOTA_REQUESTS", "1")
    who = User(f"u{time.time_ns()}")
    await quota.charge(None, who, "utility")
    with pytest.raises(quota.QuotaExceeded, match="utility"):
        await quota.charge(None, who, "utility")


async def test_concurrent_creates_of_one_knowledge_base_make_one_owner():
    import asyncio

    from langgraph.store.memory import InMemoryStore

    from store import knowledge

    store = InMemoryStore()
    users = [User("alice"), User("bob")] * 5
    outcomes = await asyncio.gather(
        *(kb_service.create_owned_kb(store, u, "race", f"by {u.identity}") for u in users), return_exceptions=True
    )
    created = [o for o in outcomes if isinstance(o, dict)]
    assert len(created) == 1
    assert all(isinstance(o, knowledge.KBExistsError) for o in outcomes if not isinstance(o, dict))
    assert (await knowledge.get_kb(store, "race"))["owner"] == created[0]["owner"]


def test_owner_rule():
    shared, owned = {"name": "docs"}, {"name": "mine", "owner": "alice"}
    alice, bob, ops = User("alice"), User("bob"), User("ops", [ADMIN])
    assert kb_service.can_write(alice, owned) and not kb_service.can_write(bob, owned)
    assert not kb_service.can_write(alice, shared) and kb_service.can_write(ops, shared)
    assert kb_service.can_write(None, shared)  # no auth configured: the CLI and tests


def test_errors_have_seed_002_shape_and_retry_after_header():
    response = error_response(ApiError("QUOTA_EXCEEDED", "slow down", {"retry_after": 12}))
    assert response.status_code == 429 and response.headers["retry-after"] == "12"
    assert json.loads(response.body) == {
        "error": "QUOTA_EXCEEDED",
        "message": "slow down",
        "details": {"retry_after": 12},
    }
    assert ApiError("TIMEOUT_ERROR", "late").status == 408 and ApiError("INVALID_URL_FORMAT", "x").status == 400


def test_json_depth_counts_brackets_outside_strings_only():
    from server.limits import json_depth_exceeded

    assert json_depth_exceeded(b"[" * 101 + b"]" * 101)
    assert not json_depth_exceeded(b"[" * 100 + b"]" * 100)
    assert not json_depth_exceeded(json.dumps({"text": "[{" * 500, "list": [[1], [2]]}).encode())
    assert not json_depth_exceeded(b"[]" * 10_000)  # wide, not deep
