"""Base classes for wire models: write-models forbid unknown fields, read-models ignore them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WriteModel(BaseModel):
    """A request body: unknown fields are a client mistake and are rejected (422)."""

    model_config = ConfigDict(extra="forbid")


class ReadModel(BaseModel):
    """A response body: unknown fields from a newer server are ignored by older clients."""

    model_config = ConfigDict(extra="ignore", from_attributes=True)
