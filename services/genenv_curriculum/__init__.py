"""Curriculum service: α-curriculum scores of seed batches and the difficulty ledger over HTTP."""
