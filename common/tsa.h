/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Lock contracts the compiler checks: clang's thread-safety analysis
 * (-Wthread-safety, make check-thread-safety).  A mutex is a mutex_t;
 * a function that must be called holding a lock says REQUIRES (lock)
 * in its declaration, one that takes or lets go of a lock ACQUIRE or
 * RELEASE, and every caller is checked against it.  A lock over ranges
 * (the stripes' write locks, the rmw locks) is one capability for the
 * whole set: REQUIRES (*stripes) means "holds the write locks of the
 * range it works on".  Other compilers see plain declarations.
 */

#ifndef COMMON_TSA_H
#define COMMON_TSA_H

#include <pthread.h>

#ifdef __clang__
#define TSA(...) __attribute__ ((__VA_ARGS__))
#else
#define TSA(...)
#endif

#define CAPABILITY(name) TSA (capability (name))
#define REQUIRES(...) TSA (requires_capability (__VA_ARGS__))
#define ACQUIRE(...) TSA (acquire_capability (__VA_ARGS__))
#define RELEASE(...) TSA (release_capability (__VA_ARGS__))
#define TRY_ACQUIRE(...) TSA (try_acquire_capability (__VA_ARGS__))
#define EXCLUDES(...) TSA (locks_excluded (__VA_ARGS__))
/* For variables at file scope: clang cannot name a sibling field in C,
 * so a field's lock is said in a comment at the field.
 */
#define GUARDED_BY(lock) TSA (guarded_by (lock))
/* For a struct's field: clang cannot check it in C (it names no
 * sibling field there), so it checks nothing; it says at the field
 * which lock a thread holds to change it (and, unless the field's
 * comment says it is read without, to read it), and
 * tests/test-locks-guarded.sh holds docs/design.md's table of locks
 * to it.
 */
#define FIELD_GUARDED_BY(lock)
/* For the few functions that take or drop a lock on a path the
 * analysis cannot follow (a lock wrapper's own body, a wait that lets
 * a lock go and takes it back); each says why.
 */
#define NO_TSA TSA (no_thread_safety_analysis)

typedef pthread_mutex_t mutex_t CAPABILITY ("mutex");

#endif /* COMMON_TSA_H */
