"""server/auth.py and tools/identity.py: keys, open mode, ownership filters, store scope, run identity."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from langgraph.runtime import ServerInfo
from langgraph_sdk import Auth
from langgraph_sdk.auth.types import StudioUser

from server import auth as server_auth
from tools.identity import ADMIN, run_user_id


@dataclass
class User:
    identity: str
    permissions: list[str] = field(default_factory=list)


ALICE, BOB, OPS = User("alice"), User("bob"), User("ops", [ADMIN])


def ctx(user, resource: str, action: str) -> Auth.types.AuthContext:
    return Auth.types.AuthContext(
        user=user, permissions=getattr(user, "permissions", []), resource=resource, action=action
    )


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("AGENT_API_KEYS", "alice=k-alice, bob=k-bob,ops=k=ops")
    monkeypatch.setenv("AGENT_ADMIN_USERS", "ops")


async def test_keys_map_to_users_by_bearer_or_x_api_key(keys):
    assert await server_auth.authenticate("Bearer k-alice", None) == {"identity": "alice", "permissions": []}
    assert (await server_auth.authenticate(None, {b"x-api-key": b"k-bob"}))["identity"] == "bob"
    # '=' inside a key is kept; admins get the admin permission
    assert await server_auth.authenticate("bearer k=ops", None) == {"identity": "ops", "permissions": [ADMIN]}


@pytest.mark.parametrize(
    "authorization, headers, detail",
    [
        (None, None, "Missing API key"),
        ("Basic k-alice", None, "Missing API key"),
        ("Bearer ", {b"x-api-key": b""}, "Missing API key"),
        ("Bearer k-alicex", None, "Invalid API key"),
        (None, {b"x-api-key": b"K-ALICE"}, "Invalid API key"),
    ],
)
async def test_missing_or_wrong_keys_are_refused(keys, authorization, headers, detail):
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.authenticate(authorization, headers)
    assert refused.value.status_code == 401 and detail in refused.value.detail


def test_a_malformed_key_list_is_an_error_that_does_not_echo_the_secret(monkeypatch):
    monkeypatch.setenv("AGENT_API_KEYS", "alice=k-alice,secret-without-user")
    with pytest.raises(ValueError) as error:
        server_auth.api_keys()
    assert "user_id=key" in str(error.value) and "secret-without-user" not in str(error.value)


async def test_without_keys_langgraph_dev_is_open_and_other_servers_refuse(monkeypatch):
    monkeypatch.delenv("AGENT_API_KEYS", raising=False)
    monkeypatch.setenv("LANGSMITH_LANGGRAPH_API_VARIANT", "local_dev")
    assert await server_auth.authenticate(None, None) == {"identity": server_auth.OPEN_USER, "permissions": [ADMIN]}
    monkeypatch.delenv("LANGSMITH_LANGGRAPH_API_VARIANT")
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.authenticate("Bearer anything", None)
    assert refused.value.status_code == 401 and "AGENT_API_KEYS" in refused.value.detail


def test_a_server_that_would_refuse_everybody_says_so_at_start_up(monkeypatch, caplog):
    for name in ("AGENT_API_KEYS", "AGENT_JWT_SECRET", "AGENT_JWT_JWKS_URL", "LANGSMITH_LANGGRAPH_API_VARIANT"):
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level("WARNING", logger="server.auth"):
        assert server_auth.warn_if_closed() is True
    assert "refuses every request with 401" in caplog.text and "AGENT_API_KEYS" in caplog.text
    monkeypatch.setenv("LANGSMITH_LANGGRAPH_API_VARIANT", "local_dev")  # langgraph dev is open instead
    assert server_auth.warn_if_closed() is False
    monkeypatch.delenv("LANGSMITH_LANGGRAPH_API_VARIANT")
    monkeypatch.setenv("AGENT_API_KEYS", "alice=k-alice")
    assert server_auth.warn_if_closed() is False


async def test_creation_stamps_the_owner_and_reads_are_filtered_to_it():
    value = {"metadata": {"topic": "x"}}
    assert await server_auth.on_create(ctx(ALICE, "threads", "create"), value) == {"owner": "alice"}
    assert value["metadata"] == {"owner": "alice", "topic": "x"}
    own = {"metadata": {"owner": "alice"}}
    assert await server_auth.on_create(ctx(ALICE, "threads", "create"), own) == {"owner": "alice"}
    # naming someone else is refused, not silently re-labelled
    for action, handler in (("create", server_auth.on_create), ("create_run", server_auth.on_run)):
        foreign = {"metadata": {"owner": "bob", "topic": "x"}}
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            await handler(ctx(ALICE, "threads", action), foreign)
        assert refused.value.status_code == 403 and "metadata.owner" in refused.value.detail
    empty = {"metadata": None}
    await server_auth.on_create(ctx(ALICE, "threads", "create"), empty)
    assert empty["metadata"] == {"owner": "alice"}
    for action in ("read", "search", "update", "delete", "create_run"):
        assert await server_auth.owner_only(ctx(BOB, "threads", action), {}) == {"owner": "bob"}
    # a run is stamped too (the server copies it onto a thread the run creates)
    run = {"metadata": {}}
    assert await server_auth.on_run(ctx(BOB, "threads", "create_run"), run) == {"owner": "bob"}
    assert run["metadata"]["owner"] == "bob"
    admin_run = {"metadata": {}}
    assert await server_auth.on_run(ctx(OPS, "threads", "create_run"), admin_run) is None
    assert admin_run["metadata"] == {}
    # administrators see everything and may create on someone's behalf
    assert await server_auth.owner_only(ctx(OPS, "threads", "search"), {}) is None
    delegated = {"metadata": {"owner": "carol"}}
    assert await server_auth.on_create(ctx(OPS, "threads", "create"), delegated) is None
    assert delegated["metadata"]["owner"] == "carol"


async def test_assistants_are_readable_by_all_and_changeable_by_their_owner():
    assert await server_auth.assistants_are_shared(ctx(BOB, "assistants", "search"), {}) is None
    assert await server_auth.assistant_changes(ctx(BOB, "assistants", "update"), {}) == {"owner": "bob"}


@pytest.fixture
async def kb_store(monkeypatch):
    """The server's store, holding an operator's knowledge base `edu`, alice's private `diary`
    and alice's `recipes`, which an administrator shared."""
    from langgraph.store.memory import InMemoryStore

    from store import knowledge

    store = InMemoryStore()
    await store.aput(knowledge.REGISTRY_NAMESPACE, "edu", {"name": "edu"})
    await store.aput(knowledge.REGISTRY_NAMESPACE, "diary", {"name": "diary", "owner": "alice"})
    await store.aput(knowledge.REGISTRY_NAMESPACE, "recipes", {"name": "recipes", "owner": "alice", "shared": True})

    async def server_store():
        return store

    monkeypatch.setattr("server.kb.server_store", server_store)
    return store


@pytest.mark.parametrize(
    "user, action, namespace, key",
    [
        (ALICE, "put", ("memories", "alice", "semantic"), None),
        (ALICE, "search", ("memories", "alice"), None),
        (ALICE, "list_namespaces", ("memories", "alice"), None),
        (ALICE, "delete", ("memories", "alice", "chat"), None),
        (BOB, "search", ("kb", "edu"), None),
        (BOB, "get", ("kb_docs", "edu"), "some-document"),
        (BOB, "list_namespaces", ("kb", "recipes"), None),
        (BOB, "get", ("kb_registry",), "recipes"),
        (ALICE, "search", ("kb", "diary"), None),
        (ALICE, "get", ("kb_registry",), "diary"),
        (OPS, "put", ("kb", "edu"), None),
        (OPS, "search", ("kb", "diary"), None),
        (OPS, "search", ("kb_registry",), None),
        (OPS, "search", ("memories", "alice"), None),
        (StudioUser("langgraph-studio-user"), "list_namespaces", None, None),
    ],
)
async def test_store_allows_own_memories_and_reading_knowledge_bases(kb_store, user, action, namespace, key):
    assert await server_auth.store_scope(ctx(user, "store", action), {"namespace": namespace, "key": key}) is None


@pytest.mark.parametrize(
    "user, action, namespace, key, detail",
    [
        (BOB, "get", ("memories", "alice", "semantic"), "k", "is not yours"),
        (BOB, "search", ("memories",), None, "is not yours"),
        (BOB, "search", (), None, "is not yours"),
        (BOB, "list_namespaces", None, None, "is not yours"),
        (BOB, "put", ("scratch",), "k", "is not yours"),
        (BOB, "put", ("kb", "edu"), "k", "read-only"),
        (BOB, "delete", ("kb_docs", "edu"), "k", "read-only"),
        # another user's private knowledge base is unknown to bob, whichever way he asks
        (BOB, "search", ("kb", "diary"), None, "Unknown knowledge base 'diary'"),
        (BOB, "get", ("kb_docs", "diary"), "k", "Unknown knowledge base 'diary'"),
        (BOB, "list_namespaces", ("kb", "diary"), None, "Unknown knowledge base 'diary'"),
        (BOB, "get", ("kb_registry",), "diary", "Unknown knowledge base 'diary'"),
        (BOB, "search", ("kb",), None, "Name one knowledge base"),
        (BOB, "list_namespaces", ("kb_docs",), None, "Name one knowledge base"),
        (BOB, "search", ("kb_registry",), None, "GET /api/v1/kb"),
        (BOB, "list_namespaces", ("kb_registry",), None, "GET /api/v1/kb"),
        (BOB, "search", ("kb", "Not A Name"), None, "Invalid knowledge base name"),
        # labels are escaped: 'a.b' cannot reach the namespace of 'a%2Eb' or the other way round
        (User("a%2Eb"), "get", ("memories", "a%2Eb", "semantic"), "k", "is not yours"),
    ],
)
async def test_store_refuses_everything_else(kb_store, user, action, namespace, key, detail):
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        await server_auth.store_scope(ctx(user, "store", action), {"namespace": namespace, "key": key})
    assert refused.value.status_code == 403 and detail in refused.value.detail
    assert "diary" not in refused.value.detail.partition("Existing")[2]  # never listed to bob


def runtime(user, context_user: str = "from-context"):
    info = ServerInfo(assistant_id="a", graph_id="react", user=user) if user is not None else None
    return SimpleNamespace(server_info=info, context=SimpleNamespace(user_id=context_user))


@pytest.mark.parametrize(
    "user, expected",
    [
        (None, "from-context"),  # no server auth: in-process runs, scheduled memory_writer runs
        (ALICE, "alice"),  # a regular user acts for themselves whatever the context says
        (OPS, "from-context"),  # administrators act for the user they name
        (StudioUser("langgraph-studio-user"), "from-context"),
    ],
)
def test_run_user_id(user, expected):
    assert run_user_id(runtime(user)) == expected
