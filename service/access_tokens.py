"""Scoped access tokens: JWTs (HS256) signed with one of the server's full API keys, as Qdrant's JWT access
control and Meilisearch's tenant tokens. A token names the collections it reaches, read (`r`) or read-write (`rw`),
and may pin a read grant to a filter that every read of that collection is ANDed with: one token per tenant of a
shared collection. No server state: rotating the signing key revokes every token it signed.

    {"exp": 1798761600,
     "access": [{"collection": "notes", "access": "r", "filter": {"must": [{"key": "tenant", ...}]}},
                {"collection": "drafts", "access": "rw"}]}

`"access": "r"` (or `"rw"`) alone is a token for every collection, as a read-only (or full) API key. A scoped
token reaches only the routes of `_SCOPED_ROUTES`, checked on the headers before any body is read; the routes that
name their collection in the body (search, batch, recommend, index) check it in their handler (`require`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import jwt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from indexing.filter_parser import parse_filter
from indexing.filters import Bool, FilterError, Node

MAX_GRANTS = 64  # collections a token may name
MIN_SIGNING_KEY = 32  # bytes: HS256 keys shorter than its hash are guessable (RFC 7518 3.2); shorter keys sign none
ACCESS_STATE = "vela_access"  # the key of a request's Access in its ASGI scope's state


class _GrantClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: Annotated[str, Field(min_length=1, max_length=255)]
    access: Literal["r", "rw"]
    filter: dict[str, Any] | None = None


class _Claims(BaseModel):
    model_config = ConfigDict(extra="ignore")  # exp, iat, sub... are the JWT library's or the issuer's
    access: Literal["r", "rw"] | Annotated[list[_GrantClaim], Field(min_length=1, max_length=MAX_GRANTS)]


@dataclass(frozen=True)
class CollectionGrant:
    write: bool
    filter: dict[str, Any] | None  # JSON, parsed against the collection's schema where it is used


@dataclass(frozen=True)
class Grant:
    """What a scoped token reaches: collections by the name a request gives (a collection's or an alias's)."""

    collections: Mapping[str, CollectionGrant]

    def reaches(self, name: str, *, write: bool = False) -> CollectionGrant | None:
        g = self.collections.get(name)
        return g if g is not None and (g.write or not write) else None

    def refusal(self, name: str, *, write: bool = False) -> str | None:
        """Why this token may not read (or write) collection `name`, or None when it may."""
        if self.reaches(name, write=write) is not None:
            return None
        if write and name in self.collections:
            return f"this token may only read collection {name!r}"
        return f"this token does not reach collection {name!r}"


@dataclass(frozen=True)
class Access:
    """A request's access: `full` (a full key, a global `rw` token), `read_only`, or `grant`'s collections, with
    the key that signed the token (it seals the scroll cursors of pinned reads: service/access.py)."""

    read_only: bool = False
    grant: Grant | None = None
    signing_key: bytes = field(default=b"", repr=False)


FULL = Access()
READ_ONLY = Access(read_only=True)


class TokenError(ValueError):
    """A token that does not verify, has expired or does not say what it grants (the 401's message)."""


def looks_like_token(given: bytes) -> bool:
    return given.count(b".") == 2 and len(given) > 20


def verify(token: bytes, keys: Iterable[bytes]) -> Access:
    """The access `token` grants, when one of `keys` signed it (HS256 only: the algorithm is never the token's
    choice) and it has not expired; TokenError otherwise."""
    claims: dict[str, Any] | None = None
    signer = b""
    for key in keys:
        if len(key) < MIN_SIGNING_KEY:
            continue
        try:
            claims = jwt.decode(token, key, algorithms=["HS256"], options={"require": ["access"]})
            signer = key
            break
        except jwt.InvalidSignatureError:  # another key's (a DecodeError too, so caught first): try the next
            continue
        except (jwt.DecodeError, jwt.InvalidAlgorithmError):  # not a token, or not HS256: as a wrong key
            break
        except jwt.ExpiredSignatureError as exc:  # the claims are read once the signature has verified
            raise TokenError("the token has expired") from exc
        except (jwt.ImmatureSignatureError, jwt.MissingRequiredClaimError) as exc:
            raise TokenError(f"invalid token: {exc}") from exc
        except jwt.InvalidTokenError:  # a claim of the wrong type (exp as text...)
            continue
    if claims is None:
        raise TokenError("invalid API key")  # as a wrong key: whether it is a token is not the caller's to learn
    try:
        parsed = _Claims.model_validate(claims)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise TokenError(f"invalid token: {where}: {first['msg']}") from exc
    if isinstance(parsed.access, str):
        return READ_ONLY if parsed.access == "r" else FULL
    grants: dict[str, CollectionGrant] = {}
    for g in parsed.access:
        if g.filter is not None and g.access == "rw":  # a filter bounds reads; which writes it allows is unclear
            raise TokenError(f"invalid token: collection {g.collection!r}: a filter is for read access ('r') only")
        if g.filter is not None:
            try:  # its shape now; its fields' types against the collection's schema where it is used
                pin = parse_filter(g.filter, None, "filter")
            except FilterError as exc:
                raise TokenError(f"invalid token: collection {g.collection!r}: {exc}") from exc
            if _pins_nothing(pin):
                raise TokenError(f"invalid token: collection {g.collection!r}: its filter keeps nothing out")
        if g.collection in grants:
            raise TokenError(f"invalid token: collection {g.collection!r} is named twice")
        grants[g.collection] = CollectionGrant(write=g.access == "rw", filter=g.filter)
    return Access(grant=Grant(grants), signing_key=signer)


def _pins_nothing(node: Node | None) -> bool:
    """A parsed filter without a condition anywhere in it ({}, {"must": []}, nested empty clauses): a pin that
    pins nothing, surely a mistake. A `must_not` of one excludes everything: strict, not empty."""
    if node is None:
        return True
    if not isinstance(node, Bool):
        return False
    if node.must_not:
        return False
    return all(_pins_nothing(c) for c in (*node.must, *node.should, *node.min_should))


def mint(key: str, access: Literal["r", "rw"] | list[dict[str, Any]], *, expires_at: int | None = None) -> str:
    """A token signed with `key` (one of the server's VELA_API_KEYS); checked as `verify` will check it."""
    if len(key.encode()) < MIN_SIGNING_KEY:
        raise TokenError(f"a signing key needs at least {MIN_SIGNING_KEY} bytes (this one has {len(key.encode())})")
    claims: dict[str, Any] = {"access": access}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    token = jwt.encode(claims, key, algorithm="HS256")
    verify(token.encode(), [key.encode()])  # a grant the server would refuse is refused here, where it is made
    return token


# The routes a scoped token may reach: (methods, path, what it needs). "read"/"write" name their collection in
# the path; "body" routes name it in the body and check it in their handler ("body-write" needs a token that may
# write somewhere, before the body is read); "job" checks the job's collection there too; "list" shows the
# granted collections alone. Every route not here is refused: the table fails closed.
_C = r"(?P<c>[^/]+)"
_SCOPED_ROUTES: list[tuple[frozenset[str], re.Pattern[str], str]] = [
    (frozenset({"GET", "HEAD"}), re.compile(r"/collections"), "list"),
    (frozenset({"GET", "HEAD"}), re.compile(rf"/collections/{_C}"), "read"),
    (frozenset({"GET", "HEAD"}), re.compile(rf"/collections/{_C}/documents(/.+)?"), "read"),
    (frozenset({"POST"}), re.compile(rf"/collections/{_C}/(documents|count|facet)"), "read"),
    (frozenset({"PATCH", "DELETE"}), re.compile(rf"/collections/{_C}/documents/.+"), "write"),
    (frozenset({"POST"}), re.compile(rf"/collections/{_C}/delete"), "write"),
    (frozenset({"POST"}), re.compile(r"/search|/search/batch|/recommend"), "body"),
    (frozenset({"POST"}), re.compile(r"/index"), "body-write"),
    (frozenset({"GET", "HEAD"}), re.compile(r"/jobs/[^/]+"), "job"),
    (frozenset({"GET"}), re.compile(r"/limits"), "any"),
]


def scoped_refusal(method: str, path: str, grant: Grant) -> str | None:
    """Why a scoped token may not send this request (the 403's message), or None when it may (or when its handler
    decides: "body", "job", "list")."""
    for methods, pattern, needs in _SCOPED_ROUTES:
        m = pattern.fullmatch(path)
        if m is None or method not in methods:
            continue
        if needs in ("read", "write"):
            return grant.refusal(m.group("c"), write=needs == "write")
        if needs == "body-write" and not any(g.write for g in grant.collections.values()):
            return "this token may only read: indexing needs a token that may write a collection, or a key"
        return None
    return "this token reaches only its collections' searches and documents: this request needs an API key"
