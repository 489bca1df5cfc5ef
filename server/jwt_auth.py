"""Bearer JWTs from an identity provider, beside the API keys of server/auth.py.

A token is verified with PyJWT: signature (HS256 with `AGENT_JWT_SECRET`, or the provider's
keys from `AGENT_JWT_JWKS_URL`), `exp` (required) and `nbf` with `AGENT_JWT_LEEWAY` seconds of
skew, `aud` against `AGENT_JWT_AUDIENCE` and `iss` against `AGENT_JWT_ISSUER` when set. The
user is the `AGENT_JWT_USER_CLAIM` claim (`sub` by default).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import lru_cache

import jwt

from settings import settings


class JWTRejected(ValueError):
    """The token is not acceptable; the message says why (never the token itself)."""


@dataclass(frozen=True)
class JWTConfig:
    secret: str | None
    jwks_url: str | None
    algorithms: tuple[str, ...]
    audience: str | None
    issuer: str | None
    user_claim: str
    leeway: float


def jwt_config() -> JWTConfig | None:
    """The JWT settings, or None when JWT users are not configured."""
    config = settings()
    secret = config.AGENT_JWT_SECRET.get_secret_value() if config.AGENT_JWT_SECRET else None
    if not secret and not config.AGENT_JWT_JWKS_URL:
        return None
    default = ("HS256",) if secret else ("RS256", "ES256")
    return JWTConfig(
        secret=secret,
        jwks_url=config.AGENT_JWT_JWKS_URL,
        algorithms=tuple(config.AGENT_JWT_ALGORITHMS) or default,
        audience=config.AGENT_JWT_AUDIENCE,
        issuer=config.AGENT_JWT_ISSUER,
        user_claim=config.AGENT_JWT_USER_CLAIM,
        leeway=config.AGENT_JWT_LEEWAY,
    )


def looks_like_jwt(token: str) -> bool:
    """True for a compact JWS (three base64url segments); API keys never contain dots."""
    parts = token.split(".")
    return len(parts) == 3 and all(parts)


@lru_cache(maxsize=4)
def _jwks_client(url: str) -> jwt.PyJWKClient:
    return jwt.PyJWKClient(url, cache_keys=True, lifespan=3600, timeout=10)


async def _signing_key(token: str, config: JWTConfig):
    header = jwt.get_unverified_header(token)
    if config.jwks_url and (not config.secret or not str(header.get("alg", "")).startswith("HS")):
        try:
            found = await asyncio.to_thread(_jwks_client(config.jwks_url).get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError as exc:
            raise JWTRejected(f"The identity provider's keys could not be fetched: {exc}") from None
        except jwt.PyJWKClientError as exc:
            raise JWTRejected(f"No key of the identity provider matches the token: {exc}") from None
        return found.key
    return config.secret


async def verify_jwt(token: str, config: JWTConfig) -> str:
    """The user id the token names; JWTRejected with the reason when it is not acceptable."""
    try:
        key = await _signing_key(token, config)
        claims = jwt.decode(
            token,
            key,
            algorithms=list(config.algorithms),
            audience=config.audience,
            issuer=config.issuer,
            leeway=config.leeway,
            options={"require": ["exp"]},
        )
    except jwt.ExpiredSignatureError:
        raise JWTRejected("Token expired.") from None
    except jwt.InvalidAudienceError:
        raise JWTRejected("Token audience (aud) is not accepted by this server.") from None
    except jwt.InvalidIssuerError:
        raise JWTRejected("Token issuer (iss) is not accepted by this server.") from None
    except jwt.InvalidSignatureError:
        raise JWTRejected("Token signature is invalid.") from None
    except jwt.InvalidAlgorithmError:
        raise JWTRejected(f"Token algorithm is not accepted (accepted: {', '.join(config.algorithms)}).") from None
    except jwt.MissingRequiredClaimError as exc:
        raise JWTRejected(f"Token lacks the required claim {exc.claim!r}.") from None
    except jwt.InvalidTokenError as exc:
        raise JWTRejected(f"Invalid token: {exc}") from None
    user = claims.get(config.user_claim)
    if not isinstance(user, str | int) or not str(user).strip():
        raise JWTRejected(f"Token lacks the user claim {config.user_claim!r}.")
    return str(user).strip()
