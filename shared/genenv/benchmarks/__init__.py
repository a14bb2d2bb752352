"""The benchmark harness (``base``): one framework every evaluator builds on. Each family's evaluator lives in its
folder, ``genenv.domains.<family>.benchmark``; the lookup by benchmark name and the held-out evaluator of any domain
are :mod:`genenv.domains.evaluators`."""
