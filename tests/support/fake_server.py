# SPDX-License-Identifier: Apache-2.0
"""What the fake servers of the tests share (tests/apiserver, tests/aws): an HTTPS server
with a plain-HTTP control channel beside it on 127.0.0.1, the "READY <port> <admin port>"
line the test reads (tests/support/child.c), and an exit when the test closes stdin."""
import json
import os
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class AdminHandler(BaseHTTPRequestHandler):
    """The base of a control channel's handler: quiet, answers JSON."""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, obj, code=200):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(handler, admin_handler, cert, key, port=0, admin_port=0, quiet_errors=False):
    """Serves `handler` over HTTPS and `admin_handler` over HTTP until stdin closes."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    class TLSServer(ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self):
            sock, addr = self.socket.accept()
            # As Go's net/http does: the headers and the body, written apart, must not wait
            # for the client's delayed ACK (40 ms per answer).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

        def handle_error(self, request, client_address):
            if not quiet_errors:
                super().handle_error(request, client_address)

    api = TLSServer(("127.0.0.1", port), handler)
    admin = ThreadingHTTPServer(("127.0.0.1", admin_port), admin_handler)
    admin.daemon_threads = True
    threading.Thread(target=admin.serve_forever, daemon=True).start()
    print("READY %d %d" % (api.server_address[1], admin.server_address[1]), flush=True)

    # Exit when the parent closes our stdin (the test process went away).
    def watch_stdin():
        try:
            sys.stdin.read()
        finally:
            os._exit(0)
    threading.Thread(target=watch_stdin, daemon=True).start()
    api.serve_forever()
