"""The runtime's store: SQLite (embedded default, WAL) or PostgreSQL, one schema, chosen by URL.

It keeps every activated bundle's bytes verbatim, one record per
activation (approval and signatures, trusted time, forced flag and reason)
and the active version per pact id; every load re-verifies the stored
bytes before they are used.
"""

from pactwright.runtime.store._store import (
    ActivationRecord,
    ActiveVersion,
    Finding,
    Store,
    StoredBundle,
    WriteTx,
    open_store,
)

__all__ = ["ActivationRecord", "ActiveVersion", "Finding", "Store", "StoredBundle", "WriteTx", "open_store"]
