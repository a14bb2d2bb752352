"""``genenv up``'s port check (genenv.devstack.ports_in_use), on real sockets: a listener makes a port taken; the
TIME_WAIT connections a stack that just stopped leaves behind do not (its services would bind it, as uvicorn
does with SO_REUSEADDR), so `genenv up` right after another stack starts instead of refusing for a minute."""

from __future__ import annotations

import socket

from genenv.devstack import ports_in_use


def _listener() -> socket.socket:
    server = socket.socket()
    # As uvicorn listens (its connections' TIME_WAIT entries carry the flag, which is what lets a new bind in).
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def test_a_listening_port_is_taken_and_a_free_one_is_not() -> None:
    with _listener() as server:
        port = server.getsockname()[1]
        assert ports_in_use({"control-plane": port}) == {"control-plane": port}
    assert ports_in_use({"control-plane": port}) == {}


def test_connections_in_time_wait_do_not_make_the_port_taken() -> None:
    server = _listener()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server's side closes first: the connection on `port` enters TIME_WAIT
    client.recv(1)
    client.close()
    server.close()
    probe = socket.socket()  # what a plain bind (no SO_REUSEADDR) sees: the port looks busy
    try:
        probe.bind(("127.0.0.1", port))
        plain_bind_fails = False
    except OSError:
        plain_bind_fails = True
    finally:
        probe.close()
    assert plain_bind_fails, "no TIME_WAIT connection was left on the port; the test proves nothing"
    assert ports_in_use({"control-plane": port}) == {}
