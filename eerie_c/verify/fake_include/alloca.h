/* eerie-c verifier stand-in for <alloca.h> (parsing only): declared so that a call parses
 * and is then rejected by name. */
#ifndef EERIE_FAKE_ALLOCA_H
#define EERIE_FAKE_ALLOCA_H
#include <stddef.h>
void *alloca(size_t n);
#endif
