"""Bulk ingest (``POST /api/ingest``): a whole run recorded elsewhere, posted as one JSON
object or as NDJSON, stored all or nothing and idempotent under a key. ``sources`` reads
the body, ``records`` checks the header and each trial record, ``submit`` writes the run."""
