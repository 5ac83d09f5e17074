/* eerie-c verifier stand-in for <stdlib.h> (parsing only). The allocators are declared so
 * that code calling them parses and is then rejected by name with a clear message. */
#ifndef EERIE_FAKE_STDLIB_H
#define EERIE_FAKE_STDLIB_H
#include <stddef.h>
int abs(int x);
long labs(long x);
long long llabs(long long x);
void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
void free(void *p);
void *aligned_alloc(size_t align, size_t n);
void abort(void);
void exit(int status);
#endif
