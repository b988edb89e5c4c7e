"""What an Azure OpenAI config adds to an endpoint's (``providers.endpoint``): the deployment
named in the URL and the ``api-version`` query (docs/providers/azure.md). Errors are
``DomainError`` on ``<prefix>.<name>``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from providers.shown import value_shown

DEFAULT_API_KEY_ENV = "AZURE_OPENAI_API_KEY"
# The fields only an ``azure`` config may hold.
FIELDS = ("deployment", "api_version")
# A deployment is one path segment: Azure's names are letters, digits, '.', '-' and '_' (at most
# 64); anything else (``/``, ``..``, ``?``, ``#``, whitespace, ``%``) could change the URL.
_DEPLOYMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Azure's API versions are dates, some with a ``-preview`` suffix (``2024-10-21``,
# ``2025-01-01-preview``; learn.microsoft.com/azure/ai-services/openai/reference).
_API_VERSION = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:-preview)?")  # ASCII digits only


@dataclass(frozen=True)
class AzureDeployment:
    """A deployment's name (a safe path segment) and the ``api-version`` its calls name."""

    deployment: str
    api_version: str

    @property
    def root(self) -> str:
        """``/openai/deployments/<deployment>``, appended to the resource's ``base_url``."""
        return f"/openai/deployments/{self.deployment}"

    @property
    def path(self) -> str:
        """The chat-completions path and query every call is POSTed to, after ``base_url``."""
        return f"{self.root}/chat/completions?api-version={self.api_version}"


def deployment_parse(config: Mapping[str, Any], *, prefix: str) -> AzureDeployment:
    """``config["deployment"]`` and ``config["api_version"]``, both required. Raises
    ``DomainError`` on ``<prefix>.deployment`` (missing, or not one safe path segment) and
    ``<prefix>.api_version`` (missing, or not a date-like version such as ``2024-10-21``)."""
    deployment = config.get("deployment")
    if deployment is not None and not isinstance(deployment, str):
        raise DomainError(
            f"expected the deployment's name (a string), got {value_shown(deployment, limit=40)}",
            field=f"{prefix}.deployment",
        )
    if not deployment:
        raise DomainError(
            'required with "provider": "azure": the deployment\'s name in Azure (e.g. '
            '"gpt-4o-mini")',
            field=f"{prefix}.deployment",
        )
    if not _DEPLOYMENT.fullmatch(deployment) or ".." in deployment:
        raise DomainError(
            f"{value_shown(deployment, 80)} is not a deployment name: one URL path segment of "
            "letters, digits, '.', '-' and '_' (at most 64, no '..'); '/', '?', '#', '%' and "
            "spaces are refused",
            field=f"{prefix}.deployment",
        )
    version = config.get("api_version")
    if version is None:
        raise DomainError(
            'required with "provider": "azure": the API version every call names (e.g. '
            '"2024-10-21")',
            field=f"{prefix}.api_version",
        )
    if not isinstance(version, str) or not _API_VERSION.fullmatch(version):
        raise DomainError(
            'expected an API version such as "2024-10-21" or "2025-01-01-preview", got '
            f"{value_shown(version, limit=40)}",
            field=f"{prefix}.api_version",
        )
    return AzureDeployment(deployment=deployment, api_version=version)
