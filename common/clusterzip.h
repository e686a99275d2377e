/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A qcow2 compressed cluster's bytes: zlib's raw deflate with a 4K
 * window, as qemu writes and reads them (docs/interop/qcow2.txt in
 * qemu, compression type zlib).  Only nbdcow links this unit.
 */

#ifndef COMMON_CLUSTERZIP_H
#define COMMON_CLUSTERZIP_H

#include <stddef.h>

/* Compresses the len bytes at in into out, which has room for max.
 * Returns the compressed length, or 0 if it does not fit in max bytes
 * (the cluster is then stored as it is), or if zlib fails.
 */
extern size_t clusterzip_deflate (const void *in, size_t len,
                                  void *out, size_t max);

/* Inflates the compressed bytes at in (n of them, which may run past
 * the compressed stream's end, as a qcow2 entry's sector count does)
 * into exactly the len bytes at out.  Returns 0, or -1 if they do not
 * inflate to len bytes.
 */
extern int clusterzip_inflate (const void *in, size_t n,
                               void *out, size_t len);

#endif /* COMMON_CLUSTERZIP_H */
