# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# An HTTP server of the files of a directory with byte ranges, on
# localhost only, for nbdkit's curl plugin (python's own http.server
# serves no ranges).
#
# usage: http-range.py DIR PORT-FILE
#
# Listens on a free port of 127.0.0.1, writes its number to PORT-FILE
# once it accepts connections, and serves until killed.  Counts the
# requests it answers in DIR/.requests (one line each), for tests that
# compare how many requests a client made.

import http.server
import os
import re
import sys

directory, port_file = sys.argv[1:3]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        with open(os.path.join(directory, ".requests"), "a") as f:
            f.write(self.command + " " + self.path + "\n")

    def file(self):
        name = os.path.basename(self.path.split("?")[0])
        path = os.path.join(directory, name)
        if not name or not os.path.isfile(path):
            self.send_error(404)
            return None
        return path

    def do_HEAD(self):
        path = self.file()
        if path is None:
            return
        self.send_response(200)
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self):
        path = self.file()
        if path is None:
            return
        size = os.path.getsize(path)
        start, end = 0, size - 1
        m = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if start > end:
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range",
                             "bytes %d-%d/%d" % (start, end, size))
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            self.wfile.write(f.read(end - start + 1))


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
