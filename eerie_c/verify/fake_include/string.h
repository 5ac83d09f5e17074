/* eerie-c verifier stand-in for <string.h> (parsing only). The functions declared here are
 * the string functions model code may call; the stack bound has an allowance for each. */
#ifndef EERIE_FAKE_STRING_H
#define EERIE_FAKE_STRING_H
#include <stddef.h>
void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
#endif
