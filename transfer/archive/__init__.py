"""The sweep archive: run folders + index, fingerprints for reuse, read strictly as data."""

from transfer.archive.code import CODE_PARTS, changed_parts, code_hashes
from transfer.archive.files import ArchiveError, atomic_write_bytes
from transfer.archive.fingerprint import (
    canonical_json,
    code_version,
    fingerprint,
    fingerprint_payload,
    library_versions,
)
from transfer.archive.index import INDEX_COLUMNS, STATUSES
from transfer.archive.store import DATA_FILES, Archive, newest_first

__all__ = [
    "DATA_FILES",
    "INDEX_COLUMNS",
    "STATUSES",
    "Archive",
    "ArchiveError",
    "atomic_write_bytes",
    "canonical_json",
    "CODE_PARTS",
    "changed_parts",
    "code_hashes",
    "code_version",
    "fingerprint",
    "fingerprint_payload",
    "library_versions",
    "newest_first",
]
