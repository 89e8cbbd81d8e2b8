/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Functions the code does not call (git's banned.h; curl's CODE_STYLE): the allocator's
 * raw calls, which the af_x* wrappers replace (they abort on out-of-memory, so no caller
 * checks for NULL, and af_free takes NULL), and string functions with no bound. Each .c
 * under src/ includes this last, after every system header, so a use is a compile error
 * naming the function; src/util/util.c, which wraps them, does not.
 */
#ifndef AF_BANNED_H
#define AF_BANNED_H

#define AF_BANNED(func) sorry_##func##_is_banned_use_the_af_wrapper

#undef malloc
#define malloc(n) AF_BANNED(malloc)
#undef calloc
#define calloc(n, s) AF_BANNED(calloc)
#undef realloc
#define realloc(p, n) AF_BANNED(realloc)
#undef free
#define free(p) AF_BANNED(free)
#undef strdup
#define strdup(s) AF_BANNED(strdup)
#undef sprintf
#define sprintf(...) AF_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) AF_BANNED(vsprintf)
#undef strcpy
#define strcpy(d, s) AF_BANNED(strcpy)
#undef strcat
#define strcat(d, s) AF_BANNED(strcat)
#undef strtok
#define strtok(s, d) AF_BANNED(strtok)
#undef atoi
#define atoi(s) AF_BANNED(atoi)

#endif
