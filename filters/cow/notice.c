/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The filter's notices and refusals (notice.h). */

#include <config.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <nbdkit-filter.h>

#include "exitstatus.h"
#include "notice.h"

void
notice (const char *fmt, ...)
{
  va_list ap;
  char *msg;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  if (msg == NULL)
    return;
  nbdkit_debug ("%s", msg);
  if (exitstatus_in_background ())
    syslog (LOG_NOTICE, "cow: notice: %s", msg);
  else
    fprintf (stderr, "nbdkit: cow: notice: %s\n", msg);
  free (msg);
}

/* The name of the export last refused in this thread, freed with it:
 * nbdkit runs each connection's handshake, and so all its opens, in a
 * thread of the connection's own.
 */
static pthread_key_t refused_key;
static pthread_once_t refused_once = PTHREAD_ONCE_INIT;

static void
make_refused_key (void)
{
  pthread_key_create (&refused_key, free);
}

void
refusal_note (const char *exportname)
{
  pthread_once (&refused_once, make_refused_key);
  free (pthread_getspecific (refused_key));
  pthread_setspecific (refused_key, strdup (exportname));
}

bool
refusal_repeated (const char *exportname)
{
  char *refused;
  bool repeated;

  pthread_once (&refused_once, make_refused_key);
  refused = pthread_getspecific (refused_key);
  repeated = refused && strcmp (refused, exportname) == 0;
  free (refused);
  pthread_setspecific (refused_key, NULL);
  return repeated;
}
