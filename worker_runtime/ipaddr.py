"""Detect the address other hosts reach this worker on (shown in the console)."""

from __future__ import annotations

import socket


def detect_ip() -> str:
    """The outbound address of a UDP socket, else ``127.0.0.1``.

    Connecting a UDP socket sends nothing; it only asks the kernel which source
    address it would route from.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"
