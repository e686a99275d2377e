/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The plugin's export a clone reads (cow-clone-separator=C): a name
 * NAME C TAG is a clone of the export NAME, split at its last C, so
 * that a tag never holds C and a base name may; "C TAG" is a clone of
 * the default export "".  A name without C, or any name when there is
 * no separator, reads the export of its own name.
 */

#ifndef COW_CLONENAME_H
#define COW_CLONENAME_H

/* The base export of name, malloc'd; NULL with errno set.  separator
 * '\0': none.
 */
extern char *clone_base_name (const char *name, char separator);

#endif /* COW_CLONENAME_H */
