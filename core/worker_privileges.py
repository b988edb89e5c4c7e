"""Celery's superuser warning, filtered out only on the embedded broker when its folders are
this user's alone and the worker accepts JSON only: then nobody else can feed the worker."""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celery.exceptions import SecurityWarning

if TYPE_CHECKING:
    from celery.app.utils import Settings

ROOT_WARNING = r"You're running the worker with superuser privileges"
FILESYSTEM_TRANSPORT = "core.filesystem_broker:Transport"
FOLDER_OPTIONS = ("data_folder_in", "data_folder_out", "control_folder")


def broker_folders(*, transport: str | None, options: dict[str, Any] | None) -> list[Path] | None:
    """The embedded broker's folders and their parents, or None for another broker."""
    if transport != FILESYSTEM_TRANSPORT:
        return None
    folders = [Path(options[k]) for k in FOLDER_OPTIONS if options and options.get(k)]
    if not folders:
        return None
    return sorted({p for f in folders for p in (f, f.parent)})


def why_not_private(folders: Iterable[Path], *, uid: int) -> str | None:
    """None when each folder exists, is no link, belongs to ``uid`` and no one else may write it;
    else why not, naming the first."""
    for folder in folders:
        try:
            info = os.lstat(folder)
        except OSError as exc:
            return f"{folder}: {exc.strerror}"
        if not stat.S_ISDIR(info.st_mode):
            return f"{folder} is not a folder"
        if info.st_uid != uid:
            return f"{folder} belongs to uid {info.st_uid}, not {uid}"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{folder} may be written by others (mode {stat.filemode(info.st_mode)})"
    return None


def root_warning_is_real(
    *,
    accept_content: Iterable[str],
    transport: str | None,
    options: dict[str, Any] | None,
    uid: int,
) -> str | None:
    """Why the superuser warning names a real risk, or None (embedded broker private to ``uid``,
    JSON only)."""
    content = set(accept_content or ())
    if content - {"json", "application/json"}:
        return f"the worker accepts {sorted(content)}, not JSON only"
    folders = broker_folders(transport=transport, options=options)
    if folders is None:
        return "the broker is not the embedded folder broker: others may reach it"
    return why_not_private(folders, uid=uid)


def worker_root_warning_settle(
    sender: object = None, conf: Settings | None = None, **kwargs: object
) -> None:
    """``celeryd_init`` receiver: filter the warning out when its risk is not there."""
    if conf is None:
        return
    reason = root_warning_is_real(
        accept_content=conf.accept_content,
        transport=conf.broker_transport,
        options=conf.broker_transport_options,
        uid=os.geteuid(),
    )
    if reason is None:
        warnings.filterwarnings("ignore", message=ROOT_WARNING, category=SecurityWarning)
