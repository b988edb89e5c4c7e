"""Which hosts a model endpoint (a run's OpenAI-compatible target, a judge version) may be.

Whoever configures a target or a judge chooses the URL that workers call and whose answer is
stored in a trial that person can read, so an endpoint is a way to make the worker fetch
from its own network. ``ASSAY_ENDPOINT_HOSTS`` (settings ``ASSAY["ENDPOINT_HOSTS"]``)
lists the hosts an endpoint may name: ``host``, ``host:port``, ``*.example.com`` (any
name under it), ``[::1]:8000``; when it is empty every host is allowed except link-local
and cloud metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254 and the metadata
names below), which are refused unless an entry names them exactly (a wildcard never does).

The check reads the URL as the client reads it (``yarl``) and every spelling of an IPv4
address the resolver accepts (``2852039166``, ``0xa9.0xfe.0xa9.0xfe``, ``::ffff:169.254.169.254``),
where an endpoint is declared or started (``endpoint_url_problem``); the HTTP client checks
again what DNS answers for a name, before it connects (``resolved_address_problem``), so a
name that points at a metadata address gives an errored trial, never its answer (through a
proxy, the proxy resolves the name and only the list applies). The list itself matches
names: list only names you control.
"""

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
    """One entry of ``ASSAY_ENDPOINT_HOSTS``: a host (lowercase; ``*.`` prefix = any name
    under it) and a port, None = any port."""

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
    """``ASSAY_ENDPOINT_HOSTS`` as entries: comma-separated ``host``, ``host:port``,
    ``*.domain``, ``[v6]`` or ``[v6]:port``. Raises ``ValueError`` naming a malformed entry
    (settings turn it into ``ImproperlyConfigured``)."""
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
    """The configured entries (``ASSAY["ENDPOINT_HOSTS"]``, a string or entries); empty
    when unset."""
    value = getattr(settings, "ASSAY", {}).get("ENDPOINT_HOSTS", ())
    return host_entries_parse(value) if isinstance(value, str) else tuple(value)


def endpoint_url_problem(url: str) -> str | None:
    """Why a model endpoint may not be ``url`` (a sentence naming the host and the
    setting), or None when it may. Only the host and port are judged here; the scheme
    check stays with the caller."""
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
    """Why a connection to ``host`` may not go to ``address`` (an address DNS answered for
    it): a link-local or cloud metadata address, unless an entry names ``host`` exactly
    (any port); None when it may. The client checks every answer, so a name of someone
    else's that resolves to a metadata address (``169.254.169.254.nip.io``) is refused too."""
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
    """A URL's host as entries are matched: lowercase, punycode, no trailing dot, no IPv6
    zone, an IPv4 address in its dotted form however it was written."""
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
