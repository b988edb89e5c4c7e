"""kombu's ``filesystem://`` transport hardened (the embedded broker when REDIS_URL is unset).

kombu 5.x creates a message file before writing it, so a polling consumer can read it empty
and the worker exits (kombu issue #1551); its exchange tables share the window. Here every
file is written under a temporary name and ``os.replace``d, a message is claimed by an
atomic rename into ``.claimed/``, an undecodable one is set aside with a logged error, and
a consumer wakes on ``inotify`` (else polls every ``polling_interval``, 0.1 s)."""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import logging
import os
import select
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from queue import Empty
from time import monotonic, monotonic_ns, sleep
from typing import Any

from kombu import Connection
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

CLAIMED = ".claimed"
CORRUPT = ".corrupt"


def file_write_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` so readers see the old file, the new one or none. The temporary name starts
    with a dot (no queue matches it). Raises ``OSError``."""

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

    def _table_file(self, exchange: str) -> Path:
        """``<control_folder>/<exchange>.exchange``: kombu's own path for the table."""
        # kombu's helper; celery-types' kombu stubs do not declare it.
        file: Path = self._exchange_file(exchange)  # type: ignore[attr-defined]
        return file

    @contextmanager
    def _exchange_lock(self, exchange: str) -> Iterator[None]:
        """Exclusive lock to read-modify-write a table; readers need none (replaced whole)."""

        self.control_folder.mkdir(parents=True, exist_ok=True)
        lock_path = self._table_file(exchange).with_suffix(".exchange.lock")
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

    # As kombu's filesystem channel (its stubs ignore the same override error).
    def get_table(  # type: ignore[override]
        self, exchange: str
    ) -> list[filesystem.exchange_queue_t]:
        return self._table_read(self._table_file(exchange))

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str | None, queue: str) -> None:
        file = self._table_file(exchange)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        try:
            with self._exchange_lock(exchange):
                queues = self._table_read(file)
                if binding not in queues:
                    queues.insert(0, binding)
                    file_write_atomic(file, str_to_bytes(dumps(queues)))
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc

    def _delete(
        self,
        queue: str,
        exchange: str,
        routing_key: str,
        pattern: str | None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        # kombu's virtual channel forgets the queue; then drop the binding from the table.
        super(filesystem.Channel, self)._delete(
            queue, exchange, routing_key, pattern, *args, **kwargs
        )
        file = self._table_file(exchange)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._exchange_lock(exchange):
            queues = self._table_read(file)
            if binding in queues and file.exists():
                queues.remove(binding)
                file_write_atomic(file, str_to_bytes(dumps(queues)))

    # kombu's filesystem channel's signatures for _put and _get, which differ from its
    # base's: the stubs ignore the same override error on them.
    def _put(  # type: ignore[override]
        self, queue: str, payload: dict[str, Any], **kwargs: Any
    ) -> None:
        """One file, written whole then renamed into place."""
        # Nanoseconds of the system-wide monotonic clock, zero-padded: names sort in the order
        # they were sent (kombu's milliseconds tie within a burst and the uuid breaks the tie).
        name = f"{monotonic_ns():020d}_{uuid.uuid4()}.{queue}.msg"
        filename = os.path.join(self.data_folder_out, name)
        try:
            file_write_atomic(filename, str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {filename!r} to directory") from exc

    def _get(self, queue: str) -> dict[str, Any]:  # type: ignore[override]
        """The oldest message; ``Empty`` when none. An undecodable one is moved to ``.corrupt/``."""
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
                payload: dict[str, Any] = loads(bytes_to_str(raw))
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


# inotify(7): a file was renamed into the folder (every message: ``file_write_atomic``) or a
# file opened for writing was closed (kombu's own transport writes in place).
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC


class FolderWatch:
    """A descriptor readable when a file lands in ``folder`` (Linux ``inotify`` via ``ctypes``);
    ``available`` False means poll. The watch exists before the first scan, so no event is lost."""

    def __init__(self, folder: str | Path) -> None:
        self.fd: int | None = None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            init, add_watch = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError):
            return
        add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        fd = init(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return
        if add_watch(fd, os.fsencode(folder), IN_MOVED_TO | IN_CLOSE_WRITE) < 0:
            os.close(fd)
            logger.warning("no inotify watch on %s: the broker polls it", folder)
            return
        self.fd = fd

    @property
    def available(self) -> bool:
        return self.fd is not None

    def wait(self, timeout: float) -> bool:
        """Up to ``timeout`` seconds; True when a file landed (a burst is one wakeup)."""
        if self.fd is None:
            return False
        readable, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not readable:
            return False
        with suppress(BlockingIOError):
            while os.read(self.fd, 65536):
                pass
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Transport(filesystem.Transport):
    """kombu's filesystem transport with :class:`Channel`, waiting on a :class:`FolderWatch`."""

    Channel = Channel
    global_state = filesystem.Transport.global_state
    polling_interval = 0.1

    _watch: FolderWatch | None = None

    def _folder_watch(self) -> FolderWatch:
        if self._watch is None:
            assert self.client is not None  # the connection that made this transport
            options = self.client.transport_options or {}
            folder = options.get("data_folder_in", "data_in")
            os.makedirs(folder, exist_ok=True)
            self._watch = FolderWatch(folder)
        return self._watch

    # kombu's virtual transport's signature (its stubs ignore the same override error).
    def drain_events(  # type: ignore[override]
        self, connection: Connection, timeout: float | None = None
    ) -> None:
        """Deliver one message, waiting on the watch between empty scans. Raises ``socket.timeout``
        after ``timeout`` seconds."""
        watch = self._folder_watch()
        started = monotonic()
        assert self.cycle is not None  # made by kombu's Transport.__init__
        get = self.cycle.get
        while True:
            try:
                get(self._deliver, timeout=timeout)
                return
            except Empty:
                waited = monotonic() - started
                if timeout is not None and waited >= timeout:
                    raise TimeoutError() from None
                pause = self.polling_interval or 0.0
                if timeout is not None:
                    pause = min(pause, timeout - waited)
                if not watch.available:
                    sleep(pause)  # no inotify: poll
                else:
                    watch.wait(pause)

    def close_connection(self, connection: Connection) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        super().close_connection(connection)
