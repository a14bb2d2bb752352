"""The one error envelope every HTTP service returns: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from pydantic import BaseModel


class ErrorBody(BaseModel):
    """What went wrong, in a shape OpenAI-compatible clients already parse."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorEnvelope(BaseModel):
    """Top-level error response."""

    error: ErrorBody


class GenEnvError(Exception):
    """A domain error that the HTTP layer maps onto the envelope. Raised below routes instead of HTTPException."""

    status_code = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def envelope(self) -> ErrorEnvelope:
        """The wire form of this error."""
        return ErrorEnvelope(error=ErrorBody(message=self.message, type=self.type, param=self.param, code=self.code))


class NotFoundError(GenEnvError):
    """The addressed object does not exist."""

    status_code = 404
    type = "not_found_error"


class ConflictError(GenEnvError):
    """The request conflicts with the object's current state (e.g. an illegal run transition)."""

    status_code = 409
    type = "conflict_error"


class TooLargeError(GenEnvError):
    """What was sent is over a size limit (the message names the limit and how to raise it)."""

    status_code = 413
    type = "request_too_large_error"


class UnprocessableError(GenEnvError):
    """Well-formed, but its content fails a check (the message lists what failed)."""

    status_code = 422


class LimitExceededError(GenEnvError):
    """A per-tenant limit (tenants.*) would be passed; the message names the limit and how to get under it."""

    status_code = 429
    type = "rate_limit_error"


class UnavailableError(GenEnvError):
    """A dependency (database, Redis, vLLM) does not answer."""

    status_code = 503
    type = "service_unavailable_error"
