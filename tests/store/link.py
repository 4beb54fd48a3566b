"""A TCP relay between clients and a server on loopback, to cut a link and restore it."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Link:
    """A TCP relay on loopback between clients and the S3 server: `cut()` drops every
    connection and refuses new ones (the link to the store is down), `restore()` listens
    again on the same port; `drop_requests(n)` lets the next `n` requests reach the server,
    then resets their connections before the answer comes back (the answer is lost). The
    server keeps its objects meanwhile."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit("//", 1)[1].split(":")
        self._target = (host, int(port))
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._drops = 0
        self.restore()

    def drop_requests(self, count: int) -> None:
        with self._lock:
            self._drops = count

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
                drop, self._drops = self._drops > 0, max(0, self._drops - 1)
            if drop:
                threading.Thread(target=self._drop, args=(client, upstream), daemon=True).start()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _drop(client: socket.socket, upstream: socket.socket) -> None:
        """Pass the request on, wait for the server's answer, then reset the client's
        connection instead of passing the answer back."""
        try:
            client.settimeout(10)
            upstream.sendall(client.recv(1 << 20))
            upstream.settimeout(10)
            upstream.recv(1)
        except OSError:
            pass
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        upstream.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
