"""Who may read ``/metrics``: a request bearing the ``ASSAY_METRICS_TOKEN`` bearer token, or
one from a network of ``ASSAY_METRICS_ALLOWED_NETWORKS`` (CIDR list; loopback only by
default). The address is the connection's (``REMOTE_ADDR``), never a forwarded header a
client could write. A wrong token is 403; a request with no token from elsewhere is 404
(nothing says the page exists). Imports nothing of prometheus_client: config.settings
parses the networks with ``networks_parse``."""

from __future__ import annotations

import hmac
import ipaddress
from typing import Protocol

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_NETWORKS = "127.0.0.0/8,::1/128"


class _Request(Protocol):
    META: dict[str, object]


def networks_parse(text: str) -> tuple[IPNetwork, ...]:
    """``text``: comma-separated CIDR blocks (``10.0.0.0/8, ::1/128``; an address alone is its
    own block); empty: none. Raises ValueError naming the bad entry."""
    networks = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(
                f"ASSAY_METRICS_ALLOWED_NETWORKS: {entry!r} is not a network "
                "(CIDR, e.g. 10.0.0.0/8)"
            ) from None
    return tuple(networks)


def metrics_access(request: _Request, *, token: str, networks: tuple[IPNetwork, ...]) -> int:
    """200 when ``request`` may read the metrics, else 403 (a bearer token that is not
    ``token``) or 404 (no token, from outside ``networks``). ``token`` empty: tokens are not
    accepted. Compared in constant time."""
    header = str(request.META.get("HTTP_AUTHORIZATION", ""))
    scheme, _, given = header.partition(" ")
    if scheme.lower() == "bearer" and given.strip():
        if token and hmac.compare_digest(given.strip().encode(), token.encode()):
            return 200
        return 403
    try:
        address = ipaddress.ip_address(str(request.META.get("REMOTE_ADDR", "")))
    except ValueError:
        return 404
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in networks):
        return 200
    return 404
