/* eerie-c verifier stand-in for <stdbool.h> (parsing only). */
#ifndef EERIE_FAKE_STDBOOL_H
#define EERIE_FAKE_STDBOOL_H
#define bool _Bool
#define true 1
#define false 0
#endif
