"""Pure checkers: R_agent of a response, as a Verdict; no I/O, no eval of generated text, time-limited.

``base`` holds the shared machinery (verdict builders, CheckFailure → invalid verdict kinds, run_checker with the
one-watchdog time limit); ``callparse`` parses function-call output; ``bfcl`` is the BFCL AST checker.
"""
