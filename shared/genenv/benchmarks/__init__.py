"""Benchmark evaluators (BFCL, API-Bank, Bamboogle, ALFWorld, TravelPlanner) on one framework (``base``)."""
