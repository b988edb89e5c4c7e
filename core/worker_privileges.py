"""Celery's superuser warning, kept exactly where its risk exists.

Celery warns ("You're running the worker with superuser privileges") whenever a worker runs
as root (or in group sudo/wheel), because a worker runs whatever its broker hands it: anyone
who can put a message on the broker then acts with root's rights, and with pickle content
can run any code at all.

On the embedded default (no ``REDIS_URL``) the broker is a set of folders under ``var/``
(``core.filesystem_broker``), and the worker runs its tasks in its own process (``--pool
solo``), as the same user as the dashboard that enqueues them. When those folders (and the
folder holding them) belong to this user and no one else may write them, and the worker
accepts JSON only, no one but this user can make the worker run anything, and nothing it
runs has a right the user's own dashboard process lacks: the warning names a risk that is
not there, and ``make demo`` on a machine (or a container) where one runs as root would
print it every time. Then, and only then, ``worker_root_warning_settle`` (connected to
Celery's ``celeryd_init``, sent just before Celery's check) filters that one warning out.
A Redis broker, a broker folder others may write, a folder owned by someone else, or pickle
content keep the warning (and pickle as root still stops the worker, as Celery does).
"""

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
    """The embedded broker's folders (``FOLDER_OPTIONS`` of the transport options) and the
    folders holding them, or None when the broker is not the embedded filesystem one."""
    if transport != FILESYSTEM_TRANSPORT:
        return None
    folders = [Path(options[k]) for k in FOLDER_OPTIONS if options and options.get(k)]
    if not folders:
        return None
    return sorted({p for f in folders for p in (f, f.parent)})


def why_not_private(folders: Iterable[Path], *, uid: int) -> str | None:
    """None when every folder of ``folders`` exists, is a real folder (not a link), belongs
    to ``uid`` and is writable by no one else (no group or other write bit); else why not,
    naming the first folder that fails."""
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
    """Why Celery's superuser warning names a real risk for this worker (module docstring),
    or None when it does not: the embedded broker, private to ``uid``, and JSON content
    only."""
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
    """``celeryd_init`` receiver: filter Celery's superuser warning out of this worker
    process when ``root_warning_is_real`` says its risk is not there; otherwise leave it."""
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
