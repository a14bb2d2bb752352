"""Shared HTTP layer: every service is built with ``make_app``."""

from genenv.http.app import make_app
from genenv.http.errors import ERROR_RESPONSES, error_response
from genenv.http.health import PUBLIC_PATHS, ReadyCheck
from genenv.http.middleware import REQUEST_ID_HEADER

__all__ = ["ERROR_RESPONSES", "PUBLIC_PATHS", "REQUEST_ID_HEADER", "ReadyCheck", "error_response", "make_app"]
