"""Checking primitives every family shares: R_agent as a Verdict; no I/O, no eval of generated text, time-limited.

``base`` holds the verdict builders, CheckFailure → invalid verdict kinds and run_checker (the one-watchdog time
limit); ``callparse`` parses function-call output; ``text`` normalises answers and scores free text. Each family's
own checker lives in its folder, ``genenv.domains.<family>.checker``.
"""
