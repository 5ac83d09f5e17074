/* eerie-c verifier stand-in for <arm_acle.h> (parsing only): the ACLE intrinsics the
 * generated C uses (helpers/dsp.c.j2) and nothing else, so a kernel that starts using
 * another one fails the C-source proof until it is added here (and checked to be a plain
 * instruction: no call, no stack). Signatures follow the ACLE specification. */
#ifndef EERIE_FAKE_ARM_ACLE_H
#define EERIE_FAKE_ARM_ACLE_H
#include <stdint.h>
int32_t __sxtb16(int32_t x);                           /* SXTB16 */
int32_t __sxtab16(int32_t acc, int32_t x);             /* SXTAB16 */
int32_t __smlad(int32_t a, int32_t b, int32_t acc);    /* SMLAD */
int32_t __smlabb(int32_t a, int32_t b, int32_t acc);   /* SMLABB */
int32_t __smlatt(int32_t a, int32_t b, int32_t acc);   /* SMLATT */
int32_t __ssub8(int32_t a, int32_t b);             /* SSUB8 (sets the GE flags) */
uint32_t __sel(uint32_t a, uint32_t b);              /* SEL (reads the GE flags) */
int32_t __ssat(int32_t x, uint32_t bits);              /* SSAT */
#endif
