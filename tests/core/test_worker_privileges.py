"""Celery's superuser warning (core.worker_privileges): filtered out only for a worker whose
broker is the embedded folder broker, private to its user, with JSON content; kept for a
Redis broker, a folder others may write, or pickle. Celery's own check is what runs."""

from __future__ import annotations

import os
import warnings
from types import SimpleNamespace

import pytest
from celery import platforms

from core.worker_privileges import (
    FILESYSTEM_TRANSPORT,
    root_warning_is_real,
    worker_root_warning_settle,
)
from demo.management.commands.demo import _loopback


def _broker(tmp_path, mode=0o700) -> dict:
    base = tmp_path / "celery"
    for folder in (base, base / "broker", base / "control"):
        folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(base / "broker", mode)
    return {
        "data_folder_in": str(base / "broker"),
        "data_folder_out": str(base / "broker"),
        "control_folder": str(base / "control"),
    }


def _celery_warns_as_root(monkeypatch, conf) -> list[str]:
    """Celery's ``check_privileges`` as a root worker would run it, after our
    ``celeryd_init`` receiver: the superuser warnings it emits."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        worker_root_warning_settle(conf=conf)  # reads the real euid: the folders are ours
        monkeypatch.setattr(platforms.os, "getuid", lambda: 0)
        monkeypatch.setattr(platforms.os, "geteuid", lambda: 0)
        platforms.check_privileges(conf.accept_content)
        monkeypatch.undo()
    return [str(w.message) for w in seen if "superuser privileges" in str(w.message)]


def _conf(options, *, transport=FILESYSTEM_TRANSPORT, content=("json",)):
    return SimpleNamespace(
        accept_content=content, broker_transport=transport, broker_transport_options=options
    )


def test_a_private_embedded_broker_with_json_gets_no_superuser_warning(tmp_path, monkeypatch):
    options = _broker(tmp_path)
    assert (
        root_warning_is_real(
            accept_content=["json"],
            transport=FILESYSTEM_TRANSPORT,
            options=options,
            uid=os.geteuid(),
        )
        is None
    )
    assert _celery_warns_as_root(monkeypatch, _conf(options)) == []


@pytest.mark.parametrize(
    "case",
    ["group-writable broker folder", "redis broker", "pickle content", "missing folder"],
)
def test_the_warning_stays_where_its_risk_is_real(tmp_path, monkeypatch, case):
    options = _broker(tmp_path, mode=0o770 if case == "group-writable broker folder" else 0o700)
    conf = _conf(options)
    if case == "redis broker":
        conf = _conf(None, transport=None)
    elif case == "pickle content":
        conf = _conf(options, content=("json", "pickle"))
    elif case == "missing folder":
        conf = _conf({**options, "control_folder": str(tmp_path / "nowhere" / "control")})
    reason = root_warning_is_real(
        accept_content=conf.accept_content,
        transport=conf.broker_transport,
        options=conf.broker_transport_options,
        uid=os.geteuid(),
    )
    assert reason
    if case == "pickle content":  # Celery refuses to run pickle as root, as before
        with pytest.raises(platforms.SecurityError):
            _celery_warns_as_root(monkeypatch, conf)
        monkeypatch.undo()
        return
    assert len(_celery_warns_as_root(monkeypatch, conf)) == 1


def test_a_folder_of_another_user_keeps_the_warning(tmp_path):
    options = _broker(tmp_path)
    assert "belongs to uid" in root_warning_is_real(
        accept_content=["json"],
        transport=FILESYSTEM_TRANSPORT,
        options=options,
        uid=os.geteuid() + 1,
    )


@pytest.mark.parametrize(
    ("addrport", "loopback"),
    [
        ("127.0.0.1:8000", True),
        ("localhost:8000", True),
        ("[::1]:8000", True),
        ("8000", True),
        ("0.0.0.0:8000", False),
        ("192.168.1.5:8000", False),
        ("example.org:80", False),
    ],
)
def test_the_demo_hides_the_development_server_warning_on_loopback_only(addrport, loopback):
    assert _loopback(addrport) is loopback
