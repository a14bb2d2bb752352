"""Wire models of the domains area: register a data-defined domain, list every domain."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import Field

from genenv.contracts.base import ReadModel, WriteModel

DOMAIN_NAME_PATTERN = r"^[a-z][a-z0-9_]{1,47}$"
DataKind = Literal["function_calling", "exact_answer", "qa"]
"""The kinds of data-defined domain: declared here only; DATA_KINDS, the seed-file checks, the kind's family
(genenv.domains.data) and the CLI help are derived from it."""
DATA_KINDS: tuple[DataKind, ...] = get_args(DataKind)


class DomainCreate(WriteModel):
    """A data-defined domain: a name, a kind and the seed file (JSON Lines), checked before it is stored."""

    name: str = Field(pattern=DOMAIN_NAME_PATTERN, description="Domain name: lower-case letters, digits and _ "
                      "(2–48 characters, starting with a letter); used in run configs as `domain`.")
    kind: DataKind = Field(description="function_calling (OpenAI tools or BFCL rows), exact_answer "
                           "({question, answer}) or qa ({question, answers}).")
    content: str = Field(description="The seed file: one JSON object per line (see docs/domains.md).")
    options: dict[str, Any] = Field(default_factory=dict, description="Kind options: exact_answer takes "
                                    "{normalize: number | exact | case-insensitive} (default case-insensitive).")


class DomainInfo(ReadModel):
    """One domain: where it comes from, whether it loads, and (data-defined) its kind and split sizes."""

    name: str
    source: Literal["builtin", "plugin", "data"]
    ok: bool = True
    reason: str | None = Field(default=None, description="Why a plug-in is unavailable.")
    origin: str = Field(description="Module (built-in), entry point (plug-in) or 'seed file' (data-defined).")
    kind: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    train_rows: int | None = None
    eval_rows: int | None = None
    sha256: str | None = None
    created_at: datetime | None = None


class DomainList(ReadModel):
    """Every domain: built-in, plug-in (failed ones with their reason) and data-defined."""

    items: list[DomainInfo]
