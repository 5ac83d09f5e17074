/* eerie-c verifier stand-in for <arm_mve.h> (parsing only): the Helium (MVE) types and
 * intrinsics the generated C uses (helpers/base_mve.c.j2, the *_mve kernels) and nothing
 * else, so a kernel that starts using another one fails the C-source proof until it is
 * added here. Each is one or two MVE instructions (no call, no stack). The vector types
 * are stand-in structs: the proof only needs them to be types. Signatures follow the
 * Arm MVE intrinsics reference. */
#ifndef EERIE_FAKE_ARM_MVE_H
#define EERIE_FAKE_ARM_MVE_H
#include <stdint.h>
typedef struct { int8_t lane[16]; } int8x16_t;
typedef struct { int32_t lane[4]; } int32x4_t;
typedef struct { int16_t lane[8]; } int16x8_t;
typedef struct { uint32_t lane[4]; } uint32x4_t;
typedef struct { uint16_t lane[8]; } uint16x8_t;
typedef uint16_t mve_pred16_t;
/* loads and stores (contiguous, predicated, scatter) */
int8x16_t vldrbq_s8(const int8_t *p);
int8x16_t vldrbq_z_s8(const int8_t *p, mve_pred16_t pred);
int32x4_t vldrbq_s32(const int8_t *p);
int32x4_t vldrbq_z_s32(const int8_t *p, mve_pred16_t pred);
int32x4_t vldrwq_s32(const int32_t *p);
void vstrbq_s8(int8_t *p, int8x16_t v);
void vstrbq_p_s8(int8_t *p, int8x16_t v, mve_pred16_t pred);
void vstrbq_s32(int8_t *p, int32x4_t v);
void vstrbq_p_s32(int8_t *p, int32x4_t v, mve_pred16_t pred);
void vstrbq_scatter_offset_s32(int8_t *p, uint32x4_t offs, int32x4_t v);
void vstrwq_scatter_offset_s32(int32_t *p, uint32x4_t offs, int32x4_t v);
mve_pred16_t vctp8q(uint32_t n);
mve_pred16_t vctp32q(uint32_t n);
/* lanes */
int8x16_t vdupq_n_s8(int8_t x);
int32x4_t vdupq_n_s32(int32_t x);
int32_t vgetq_lane_s32(int32x4_t v, int lane);
uint32_t vgetq_lane_u32(uint32x4_t v, int lane);
int32x4_t vuninitializedq_s32(void);
int32x4_t vreinterpretq_s32_s8(int8x16_t v);
uint32x4_t vreinterpretq_u32_s32(int32x4_t v);
/* arithmetic */
int32_t vmladavaq_s8(int32_t acc, int8x16_t a, int8x16_t b);
int32x4_t vaddq_s32(int32x4_t a, int32x4_t b);
int32x4_t vaddq_n_s32(int32x4_t a, int32_t b);
int32x4_t vmulq_s32(int32x4_t a, int32x4_t b);
int32x4_t vmlaq_n_s32(int32x4_t acc, int32x4_t a, int32_t s);
int32x4_t vmlasq_n_s32(int32x4_t a, int32x4_t b, int32_t s);
int32x4_t vqrdmulhq_s32(int32x4_t a, int32x4_t b);
int32x4_t vqrdmulhq_n_s32(int32x4_t a, int32_t b);
int32x4_t vshrq_n_s32(int32x4_t a, int imm);
int32x4_t vshlq_s32(int32x4_t a, int32x4_t b);
int32x4_t vshlq_r_s32(int32x4_t a, int32_t b);
int32x4_t vrshlq_n_s32(int32x4_t a, int32_t b);
int8x16_t vmaxq_s8(int8x16_t a, int8x16_t b);
int8x16_t vminq_s8(int8x16_t a, int8x16_t b);
int32x4_t vmaxq_s32(int32x4_t a, int32x4_t b);
int32x4_t vminq_s32(int32x4_t a, int32x4_t b);
/* the average pool's window sums (helpers/pool_mve.c.j2) */
int16x8_t vldrbq_s16(const int8_t *p);
int16x8_t vldrbq_z_s16(const int8_t *p, mve_pred16_t pred);
int16x8_t vdupq_n_s16(int16_t x);
int16x8_t vaddq_s16(int16x8_t a, int16x8_t b);
void vst1q_s16(int16_t *p, int16x8_t v);
mve_pred16_t vctp16q(uint32_t n);
/* and its division in the lanes */
uint16x8_t vreinterpretq_u16_s16(int16x8_t v);
int16x8_t vreinterpretq_s16_u16(uint16x8_t v);
uint16x8_t vaddq_n_u16(uint16x8_t a, uint16_t b);
uint16x8_t vaddq_u16(uint16x8_t a, uint16x8_t b);
int16x8_t vshrq_n_s16(int16x8_t a, int imm);
uint16x8_t vmulhq_u16(uint16x8_t a, uint16x8_t b);
uint16x8_t vdupq_n_u16(uint16_t x);
uint16x8_t vshlq_u16(uint16x8_t a, int16x8_t b);
int16x8_t vaddq_n_s16(int16x8_t a, int16_t b);
int16x8_t vmaxq_s16(int16x8_t a, int16x8_t b);
int16x8_t vminq_s16(int16x8_t a, int16x8_t b);
void vstrbq_p_s16(int8_t *p, int16x8_t v, mve_pred16_t pred);
#endif
