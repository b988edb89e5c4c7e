"""Client of the Assay API: ``AssayClient``, ``AssayError``; the ``assay-gate`` command
(``assay_client.gate``) and the pytest plugin (``assay_client.pytest_plugin``)."""

from assay_client.client import AssayClient
from assay_client.errors import AssayError

__all__ = ["AssayClient", "AssayError"]
