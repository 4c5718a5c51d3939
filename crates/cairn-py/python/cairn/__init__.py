"""Cairn: an embedded, transactional, ordered key-value store, with py-lmdb's API.

``import cairn as lmdb`` is the whole migration from py-lmdb 2.x: the same classes,
methods, keyword arguments and exception classes. Differences a user can observe:

- ``map_size`` is an upper limit when given; when left out the file grows as needed.
- ``buffers=True`` memoryviews are released when their transaction ends, so using one
  afterwards raises ``ValueError`` instead of reading memory that may have changed.
- ``writemap``, ``meminit``, ``map_async``, ``readahead`` and ``lock`` are accepted and
  reported by ``Environment.flags()`` but change nothing; ``max_spare_txns`` sets how many of
  this process's idle reader slots ``readers()`` lists, as py-lmdb lists its spare
  transactions (the engine keeps idle slots of its own).
- ``MapResizedError`` is raised by ``open_db`` only (LMDB: by any transaction's begin) when
  another process grew the data past this handle's ``map_size``.
"""

from ._cairn import (
    BadDbiError,
    BadRslotError,
    BadTxnError,
    BadValsizeError,
    CorruptedError,
    Cursor,
    CursorFullError,
    DbsFullError,
    DiskError,
    Environment,
    Error,
    IncompatibleError,
    InvalidError,
    InvalidParameterError,
    KeyExistsError,
    LockError,
    MapFullError,
    MapResizedError,
    MemoryError,
    NotFoundError,
    PageFullError,
    PageNotFoundError,
    PanicError,
    ReadersFullError,
    ReadonlyError,
    TlsFullError,
    Transaction,
    TxnFullError,
    VersionMismatchError,
    _Database,
    __version__,
    enable_drop_gil,
    version,
)

#: ``cairn.open(path, **kwargs)`` opens an :class:`Environment`, as ``lmdb.open`` does.
open = Environment

# Exactly py-lmdb's list (its package test holds it): `open` is there, but not in `__all__`.
__all__ = [
    "Cursor",
    "Environment",
    "Transaction",
    "_Database",
    "enable_drop_gil",
    "version",
    "BadDbiError",
    "BadRslotError",
    "BadTxnError",
    "BadValsizeError",
    "CorruptedError",
    "CursorFullError",
    "DbsFullError",
    "DiskError",
    "Error",
    "IncompatibleError",
    "InvalidError",
    "InvalidParameterError",
    "KeyExistsError",
    "LockError",
    "MapFullError",
    "MapResizedError",
    "MemoryError",
    "NotFoundError",
    "PageFullError",
    "PageNotFoundError",
    "PanicError",
    "ReadersFullError",
    "ReadonlyError",
    "TlsFullError",
    "TxnFullError",
    "VersionMismatchError",
]
