"""A hardened copy of kombu's server-less ``filesystem://`` transport (the embedded default).

kombu's filesystem transport (kombu 5.x, ``kombu/transport/filesystem.py``) creates a
message file, then locks it, then writes it. ``flock`` is advisory and a rename ignores
it, so a consumer polling the folder can move and read the file between the create and
the write: it reads ``b""`` and ``json.loads`` raises ``JSONDecodeError``, which the Celery
worker treats as an unrecoverable error and exits (kombu issue #1551; the ``make demo``
worker died this way after about 33 minutes). The exchange tables under ``control_folder``
have the same window: the first bind opens the file with ``"wb"`` (truncating it) before
locking, and every publish reads it.

This transport keeps kombu's folder layout and file names but:

- writes every message and every exchange table to a temporary name first and renames it
  into place (``os.replace``, atomic on POSIX), so a reader sees a whole file or none;
- claims a message by renaming it into ``<data_folder_in>/.claimed/`` on the same file
  system (atomic: two consumers cannot both win, unlike kombu's ``shutil.move`` to the
  system temporary folder, which copies across file systems);
- sets aside, with an error in the log, a message that still cannot be decoded (written by
  another program, or a truncated disk), instead of stopping the worker.

Select it with ``CELERY_BROKER_TRANSPORT = "core.filesystem_broker:Transport"`` and the URL
``filesystem://`` (config/settings.py does when REDIS_URL is unset).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from queue import Empty
from time import monotonic_ns

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

CLAIMED = ".claimed"
CORRUPT = ".corrupt"


def file_write_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file, the new file, or no file:
    never a part. The temporary file starts with a dot, which no queue's pattern matches.
    Raises ``OSError``."""

    path = Path(path)
    temporary = path.parent / f".{uuid.uuid4().hex}.tmp"
    try:
        with open(temporary, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class Channel(filesystem.Channel):
    """kombu's filesystem channel with atomic writes and claims (see the module docstring)."""

    @contextmanager
    def _exchange_lock(self, exchange):
        """An exclusive lock on ``<exchange>.exchange.lock`` for read-modify-write of a
        table; readers need no lock since writers replace the table whole."""

        self.control_folder.mkdir(parents=True, exist_ok=True)
        lock_path = self._exchange_file(exchange).with_suffix(".exchange.lock")
        with open(lock_path, "a+b") as stream:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)

    def _table_read(self, file: Path) -> list[filesystem.exchange_queue_t]:
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc
        try:
            return [filesystem.exchange_queue_t(*q) for q in loads(bytes_to_str(raw))]
        except ValueError:
            # A table written by kombu's own transport (another process on the plain
            # filesystem:// transport) mid-write: treat it as not yet bound.
            logger.error("exchange table %s is not valid JSON; read as empty", file)
            return []

    def get_table(self, exchange):
        return self._table_read(self._exchange_file(exchange))

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        file = self._exchange_file(exchange)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        try:
            with self._exchange_lock(exchange):
                queues = self._table_read(file)
                if binding not in queues:
                    queues.insert(0, binding)
                    file_write_atomic(file, str_to_bytes(dumps(queues)))
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        # kombu's virtual channel forgets the queue; then drop the binding from the table.
        super(filesystem.Channel, self)._delete(
            queue, exchange, routing_key, pattern, *args, **kwargs
        )
        file = self._exchange_file(exchange)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._exchange_lock(exchange):
            queues = self._table_read(file)
            if binding in queues and file.exists():
                queues.remove(binding)
                file_write_atomic(file, str_to_bytes(dumps(queues)))

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: one file, written whole then renamed into place."""
        # Nanoseconds of the system-wide monotonic clock, zero-padded: names sort in the order
        # they were sent (kombu's milliseconds tie within a burst and the uuid breaks the tie).
        name = f"{monotonic_ns():020d}_{uuid.uuid4()}.{queue}.msg"
        filename = os.path.join(self.data_folder_out, name)
        try:
            file_write_atomic(filename, str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {filename!r} to directory") from exc

    def _get(self, queue):
        """The oldest message of ``queue``; ``Empty`` when none. A message that cannot be
        decoded is moved to ``.corrupt/`` and logged, and the next one is tried."""
        suffix = f"{queue}.msg"
        claimed_folder = os.path.join(self.data_folder_in, CLAIMED)
        os.makedirs(claimed_folder, exist_ok=True)
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.startswith(".") or name.partition(".")[2] != suffix:
                continue
            claimed = os.path.join(claimed_folder, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except OSError:
                continue  # another consumer claimed it first
            try:
                with open(claimed, "rb") as stream:
                    raw = stream.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {claimed!r} from queue.") from exc
            try:
                payload = loads(bytes_to_str(raw))
            except ValueError:
                self._set_aside(claimed, name)
                continue
            self._processed(claimed, name)
            return payload
        raise Empty()

    def _set_aside(self, claimed: str, name: str) -> None:
        folder = os.path.join(self.data_folder_in, CORRUPT)
        os.makedirs(folder, exist_ok=True)
        os.replace(claimed, os.path.join(folder, name))
        logger.error("broker message %s is not valid JSON; moved to %s", name, folder)

    def _processed(self, claimed: str, name: str) -> None:
        if self.store_processed:
            os.makedirs(self.processed_folder, exist_ok=True)
            shutil.move(claimed, os.path.join(self.processed_folder, name))
        else:
            os.remove(claimed)


class Transport(filesystem.Transport):
    """kombu's filesystem transport with :class:`Channel` (atomic writes and claims)."""

    Channel = Channel
    global_state = filesystem.Transport.global_state
