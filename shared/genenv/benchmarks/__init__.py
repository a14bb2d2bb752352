"""The benchmark harness: one framework (``base``) and the lookup by benchmark name (``registry``); each family's
evaluator lives in its folder, ``genenv.domains.<family>.benchmark``."""
