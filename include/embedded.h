/*
 * embedded.h - files built into the binary (tools/embed.c writes them at
 * build time; meson.build lists which): each is its bytes with a NUL after
 * them, and their length without it.
 */
#ifndef MCPC_EMBEDDED_H
#define MCPC_EMBEDDED_H

#include <stddef.h>

#endif
