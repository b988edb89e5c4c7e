"""Model endpoints: the hosts ASSAY_ENDPOINT_HOSTS allows, and the metadata addresses
refused even without it."""

from __future__ import annotations

import asyncio
import socket

import pytest

from core.egress import endpoint_url_problem, host_entries_parse, resolved_address_problem
from providers.transport import HttpFailure, JsonPoster


@pytest.fixture
def hosts(settings):
    def configure(text: str) -> None:
        settings.ASSAY = {**settings.ASSAY, "ENDPOINT_HOSTS": host_entries_parse(text)}

    configure("")
    return configure


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://169.254.169.254./",
        "http://[::ffff:169.254.169.254]/",
        "http://[::169.254.169.254]/",  # IPv4-compatible
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64's well-known prefix (RFC 6052)
        "http://[fe80::1%25eth0]/",
        "http://[fd00:ec2::254]/",
        "http://METADATA.google.internal./computeMetadata/v1/",
    ],
)
def test_it_refuses_link_local_and_metadata_addresses_however_written(hosts, url):
    assert "link-local or cloud metadata" in endpoint_url_problem(url)


def test_it_allows_any_other_host_when_no_list_is_set(hosts):
    assert endpoint_url_problem("http://127.0.0.1:8000/v1") is None
    assert endpoint_url_problem("https://api.openai.com/v1") is None
    assert endpoint_url_problem("http://[::1]:8000/v1") is None
    assert endpoint_url_problem("http://[64:ff9b::808:808]/v1") is None


def test_it_allows_only_the_listed_hosts_and_ports(hosts):
    hosts("api.openai.com, *.example.com:443, [::1]:8000")
    assert endpoint_url_problem("https://api.openai.com/v1") is None
    assert endpoint_url_problem("https://a.b.example.com/v1") is None
    assert endpoint_url_problem("http://[::1]:8000/v1") is None
    for refused in (
        "http://a.example.com/v1",  # port 80, the entry says 443
        "https://example.com/v1",  # a wildcard names what is under it only
        "https://api.openai.com.evil.test/v1",
        "http://[::1]:8001/v1",
        "http://127.0.0.1:8000/v1",
    ):
        assert "is not in ASSAY_ENDPOINT_HOSTS" in endpoint_url_problem(refused), refused


def test_a_metadata_address_is_allowed_only_when_an_entry_names_it_exactly(hosts):
    hosts("*.internal")
    assert "metadata" in endpoint_url_problem("http://metadata.google.internal/")
    hosts("metadata.google.internal, 169.254.169.254:80")
    assert endpoint_url_problem("http://metadata.google.internal/") is None
    assert endpoint_url_problem("http://169.254.169.254/") is None


@pytest.mark.parametrize("entry", ["a/b", "*", "user@host", "host:port"])
def test_a_malformed_entry_is_a_configuration_error(entry):
    with pytest.raises(ValueError, match="ASSAY_ENDPOINT_HOSTS"):
        host_entries_parse(entry)


def test_a_name_that_resolves_to_a_metadata_address_is_refused_before_connecting(
    hosts, monkeypatch
):
    real = socket.getaddrinfo

    def fake_dns(host, *args, **kwargs):
        if host == "metadata-alias.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake_dns)
    assert endpoint_url_problem("http://metadata-alias.test/v1") is None  # the name passes

    async def post() -> None:
        poster = JsonPoster(
            "http://metadata-alias.test/v1", headers={}, timeout_s=2, max_connections=1
        )
        try:
            await poster.post({"model": "m"})
        finally:
            await poster.aclose()

    with pytest.raises(HttpFailure, match="resolves to 169.254.169.254"):
        asyncio.run(post())
    hosts("metadata-alias.test")
    assert resolved_address_problem("metadata-alias.test", "169.254.169.254") is None
