"""Which hosts a model endpoint may name (the worker calls it and stores the answer).

``ASSAY_ENDPOINT_HOSTS`` lists ``host``, ``host:port``, ``*.example.com``, ``[::1]:8000``;
empty allows all but link-local and metadata addresses, which need an exact entry. URLs are
read as ``yarl`` reads them, with every IPv4 spelling; DNS answers are checked again before
connecting (``resolved_address_problem``). The list matches names: list only yours."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from django.conf import settings
from yarl import URL

SETTING = "ASSAY_ENDPOINT_HOSTS"

# Names that cloud providers serve instance metadata (and credentials) on.
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)
METADATA_ADDRESSES = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HostEntry:
    """A host (lowercase; ``*.`` = any name under it) and a port (None: any)."""

    host: str
    port: int | None

    @property
    def wildcard(self) -> bool:
        return self.host.startswith("*.")

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.wildcard:
            return host.endswith(self.host[1:])
        return host == self.host


def host_entries_parse(text: str) -> tuple[HostEntry, ...]:
    """Comma-separated entries. Raises ``ValueError`` naming a malformed entry."""
    entries = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        try:
            url = URL(f"http://{item.replace('*.', 'wildcard--.', 1)}/")
            host = _host_normal(url.raw_host or "")
        except ValueError as exc:
            raise ValueError(f"{SETTING}: {item!r} is not a host or host:port") from exc
        if not host or url.path != "/" or url.user or "*" in host:
            raise ValueError(f"{SETTING}: {item!r} is not a host or host:port")
        entries.append(HostEntry(host=host.replace("wildcard--.", "*.", 1), port=url.explicit_port))
    return tuple(entries)


def endpoint_hosts() -> tuple[HostEntry, ...]:
    """The configured entries; empty when unset."""
    value = getattr(settings, "ASSAY", {}).get("ENDPOINT_HOSTS", ())
    return host_entries_parse(value) if isinstance(value, str) else tuple(value)


def endpoint_url_problem(url: str) -> str | None:
    """Why ``url``'s host and port may not be an endpoint (a sentence), or None. The scheme is the
    caller's check."""
    try:
        parsed = URL(url)
        host = _host_normal(parsed.raw_host or "")
        port = parsed.explicit_port or _DEFAULT_PORTS.get(parsed.scheme, 0)
    except ValueError:
        return "is not a valid URL"
    if not host:
        return "names no host"
    entries = endpoint_hosts()
    if _metadata(host) and not any(e.matches(host, port) for e in entries if not e.wildcard):
        return (
            f"host {host!r} is a link-local or cloud metadata address, refused unless "
            f"{SETTING} names it"
        )
    if entries and not any(e.matches(host, port) for e in entries):
        shown = ", ".join(_shown(e.host, e.port) for e in entries[:10])
        return f"host {_shown(host, port)} is not in {SETTING} ({shown})"
    return None


def resolved_address_problem(host: str, address: str) -> str | None:
    """Why ``host`` may not connect to ``address`` (a DNS answer): link-local or metadata, unless
    an entry names ``host`` exactly; else None."""
    found = _address(_host_normal(address))
    if found is None or not any(found in net for net in METADATA_ADDRESSES):
        return None
    host = _host_normal(host)
    if any(e.host == host for e in endpoint_hosts() if not e.wildcard):
        return None
    return (
        f"host {host!r} resolves to {found}, a link-local or cloud metadata address, refused "
        f"unless {SETTING} names it"
    )


def _shown(host: str, port: int | None) -> str:
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _host_normal(raw_host: str) -> str:
    """Lowercase, punycode, no trailing dot or IPv6 zone, IPv4 dotted."""
    host = raw_host.lower().rstrip(".").split("%", 1)[0]
    address = _address(host)
    return str(address) if address is not None else host


NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the resolver's other IPv4 spellings: 2852039166, 0xa9fea9fe, 169.254.43518
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv4 address inside an IPv6 one reaches the IPv4 host: mapped (::ffff:a.b.c.d),
        # compatible (::a.b.c.d) and NAT64's well-known prefix (64:ff9b::a.b.c.d, RFC 6052).
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        packed = int(address)
        if packed >> 32 == 0 and packed > 0xFFFF:  # ::a.b.c.d (not :: nor ::1)
            return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
        if address in NAT64_PREFIX:
            return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    return address


def _metadata(host: str) -> bool:
    if host in METADATA_NAMES:
        return True
    address = _address(host)
    return address is not None and any(address in net for net in METADATA_ADDRESSES)
