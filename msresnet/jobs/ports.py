"""TCP ports and addresses for ``msrun``: a free port, whether one is taken and by
whom, and whether an address is this machine (a multi-node job needs the master's
port on the master; :mod:`msresnet.jobs.launch` checks it before anything starts)."""

from __future__ import annotations

import socket

import psutil

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``host:port`` can be bound, i.e. the scheduler could listen there."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # like a server would
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_owner(port: int) -> str:
    """``" (pid 123, python)"`` when this user can see who listens on ``port``."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
                if conn.pid:
                    return f" (pid {conn.pid}, {psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return ""


def is_local_address(address: str) -> bool:
    """True when ``address`` belongs to this machine (this node starts the scheduler)."""
    if address in LOCAL_HOSTS:
        return True
    try:
        resolved = socket.gethostbyname(address)
    except OSError:
        return False
    mine = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}
    return resolved in mine or resolved.startswith("127.")
