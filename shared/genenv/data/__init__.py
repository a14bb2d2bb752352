"""Benchmark data: the pinned manifest, download with verification and an atomic install, and status."""
