"""verifier service."""
