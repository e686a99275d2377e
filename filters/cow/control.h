/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The control socket (cow-control=SOCKET): the commands an operator's
 * tool (nbdcow checkpoint, nbdcow view) sends the running server, to
 * make, delete and list the checkpoints of an export (changes.h) and
 * its point-in-time view.  NBD clients
 * cannot reach it: it is a Unix socket of mode 0600, so only the
 * server's user connects, unless the operator opens it to others (its
 * mode, its directory).  A thread of its own serves its clients
 * together, each as its socket is ready, one command at a time, and
 * drops a client still unanswered after 5 seconds.
 *
 * A command is the fields VERB, EXPORT and, but for list and view,
 * NAME, each ended by a zero byte, then the end of the client's
 * writing (a shutdown): "create", "delete", "list" or "identify"
 * (checkpoints), "view-create", "view-delete" or "view" (the
 * point-in-time view, blk.h), the export's name as its clients give
 * it ("" for the default export).  The answer is "ok\n" (for list,
 * followed by the checkpoints' names, oldest first, one a line; for
 * identify, the checkpoint's identity, numbers joined by '-' on one
 * line, the server's own random number first, that no other
 * checkpoint of any overlay or server has; for view-create, the export
 * name that reads the view; for view, if the export has one, its name,
 * state, bytes kept, export name, and the start of the export names
 * that read its changes since a checkpoint (the export name and the
 * changes separator; empty without one), a line each), or "error: "
 * and a message, then the server closes.
 */

#ifndef COW_CONTROL_H
#define COW_CONTROL_H

/* .get_ready: makes the socket at path, replacing one that no server
 * listens on.  nbd_socket is the path of nbdkit's own Unix socket
 * (-U), or NULL: the control socket may not take it.  Returns 0, or
 * -1 after nbdkit_error naming the parameter.
 */
extern int control_init (const char *path, const char *nbd_socket);

/* .after_fork: starts the thread.  Returns 0, or -1 after nbdkit_error. */
extern int control_start (void);

/* Stops the thread, after the command it runs, and removes the
 * socket.  Does nothing if control_init was not called.
 */
extern void control_stop (void);

#endif /* COW_CONTROL_H */
