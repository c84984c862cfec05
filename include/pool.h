/*
 * pool.h - marking memory kept for reuse (free lists of exchanges, map
 * entries) as unusable under AddressSanitizer, so that a use after a
 * "free" into a pool is caught as surely as a use after free(3).
 * Without the sanitizer these are no-ops.
 */
#ifndef MCPC_POOL_H
#define MCPC_POOL_H

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
