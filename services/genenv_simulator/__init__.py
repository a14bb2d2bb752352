"""simulator service."""
