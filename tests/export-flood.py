#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A client flooding a server with new export names:
#   export-flood.py SOCKET go|info COUNT PREFIX
# go: COUNT connections, each to a new name, writing 512 bytes into
# each export it is given and reading them back; info: NBD_OPT_INFO of
# COUNT new names, 16 per connection.  Some names are hostile (slashes,
# dots, percent signs, 4000 bytes).  Prints one JSON object: how many
# names were served, how many refused, and the errno of the refusals.
import json
import sys

import nbd

sock, mode, count, prefix = sys.argv[1:5]
count = int(count)


# The i-th name, PREFIX in it.
def name(i):
    kinds = ['%s', '../../%s', '/etc/%s', '%%2e%%2e/%s', 'x' * 4000 + '%s',
             '.%s']
    return kinds[i % len(kinds)] % ('%s-%d' % (prefix, i))


def tag(i):
    return (b'%08d' % i) * 64


served, refused, errnos = 0, 0, set()


def refusal(e):
    global refused
    refused += 1
    errnos.add(e.errno)


if mode == 'go':
    for i in range(count):
        h = nbd.NBD()
        h.set_export_name(name(i))
        try:
            h.connect_unix(sock)
        except nbd.Error as e:
            refusal(e)
            continue
        h.pwrite(tag(i), 0)
        assert h.pread(512, 0) == tag(i), 'export %d reads back wrong' % i
        h.shutdown()
        served += 1
elif mode == 'info':
    # nbdkit drops a client after 32 options: a new connection for
    # every 16 names.
    for i in range(count):
        if i % 16 == 0:
            if i:
                h.opt_abort()
            h = nbd.NBD()
            h.set_opt_mode(True)
            h.connect_unix(sock)
        h.set_export_name(name(i))
        try:
            h.opt_info()
        except nbd.Error as e:
            refusal(e)
            continue
        served += 1
    h.opt_abort()
else:
    sys.exit('mode must be go or info')

print(json.dumps({'served': served, 'refused': refused,
                  'errnos': sorted(errnos)}))
