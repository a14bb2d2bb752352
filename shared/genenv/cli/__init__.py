"""The ``genenv`` command line (Typer + Rich), one module per command group, assembled by ``main``: ``stacks``
(quickstart, up), ``export``, ``serve``, ``worker`` and the resource groups ``db``, ``runs``, ``experiments``,
``models``, ``bench``, ``data``, ``domains``; ``common`` holds what several share, ``render`` the tables."""
