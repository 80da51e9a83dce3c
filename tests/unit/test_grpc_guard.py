"""Token comparison and the per-client token bucket, with an injected clock."""

from __future__ import annotations

import pytest

from kernelevolve.grpc_guard import RateLimiter, TokenAuth, bearer_metadata, peer_host


def test_token_auth_identifies_only_exact_bearer_tokens() -> None:
    auth = TokenAuth(["alpha-token", "beta-token"])
    assert auth.identify("Bearer alpha-token") == 0
    assert auth.identify("Bearer beta-token") == 1
    for header in (None, "", "alpha-token", "Basic alpha-token", "Bearer alpha", "Bearer alpha-token2",
                   "Bearer ALPHA-TOKEN", "Bearer "):
        assert auth.identify(header) is None, header
    with pytest.raises(ValueError):
        TokenAuth(["", ""])
    assert bearer_metadata("") == ()
    assert bearer_metadata("t") == (("authorization", "Bearer t"),)


def test_rate_limiter_bucket_refills_at_its_rate() -> None:
    now = [100.0]
    limiter = RateLimiter(rate_per_s=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("b")  # its own bucket
    now[0] += 0.5  # one call's worth at 2/s
    assert limiter.allow("a") and not limiter.allow("a")
    now[0] += 60  # never more than the burst
    assert [limiter.allow("a") for _ in range(4)] == [True, True, True, False]


def test_rate_limiter_forgets_least_recent_clients() -> None:
    limiter = RateLimiter(rate_per_s=1.0, burst=1, clock=lambda: 0.0, max_clients=2)
    assert limiter.allow("a") and limiter.allow("b") and limiter.allow("c")
    assert limiter.allow("a")  # "a" was dropped: a fresh bucket
    assert not limiter.allow("c")


def test_peer_host_drops_the_ephemeral_port() -> None:
    assert peer_host("ipv4:127.0.0.1:50123") == "ipv4:127.0.0.1"
    assert peer_host("ipv6:[::1]:50123") == "ipv6:[::1]"
    assert peer_host("unix:/tmp/sock") == "unix:/tmp/sock"
