/* eerie-c verifier stand-in for <math.h> (parsing only). The functions declared here are
 * the math functions model code may call; the stack bound has an allowance for each. */
#ifndef EERIE_FAKE_MATH_H
#define EERIE_FAKE_MATH_H
#define INFINITY (1.0f / 0.0f)
#define NAN (0.0f / 0.0f)
#define HUGE_VALF INFINITY
#define HUGE_VAL (1.0 / 0.0)
#define M_PI 3.14159265358979323846
#define M_E 2.7182818284590452354
#define M_LN2 0.69314718055994530942
#define isnan(x) ((x) != (x))
#define isinf(x) ((x) == INFINITY || (x) == -INFINITY)
#define isfinite(x) (!isnan(x) && !isinf(x))
#define signbit(x) ((x) < 0)
float expf(float x);
float exp2f(float x);
float expm1f(float x);
float logf(float x);
float log2f(float x);
float log10f(float x);
float log1pf(float x);
float sqrtf(float x);
float cbrtf(float x);
float tanhf(float x);
float sinhf(float x);
float coshf(float x);
float sinf(float x);
float cosf(float x);
float tanf(float x);
float atanf(float x);
float asinf(float x);
float acosf(float x);
float fabsf(float x);
float floorf(float x);
float ceilf(float x);
float roundf(float x);
float truncf(float x);
float rintf(float x);
float nearbyintf(float x);
float erff(float x);
float powf(float x, float y);
float atan2f(float x, float y);
float fmaxf(float x, float y);
float fminf(float x, float y);
float fmaf(float x, float y, float z);
float fmodf(float x, float y);
float hypotf(float x, float y);
double exp(double x);
double exp2(double x);
double expm1(double x);
double log(double x);
double log2(double x);
double log10(double x);
double log1p(double x);
double sqrt(double x);
double cbrt(double x);
double tanh(double x);
double sinh(double x);
double cosh(double x);
double sin(double x);
double cos(double x);
double tan(double x);
double atan(double x);
double asin(double x);
double acos(double x);
double fabs(double x);
double floor(double x);
double ceil(double x);
double round(double x);
double trunc(double x);
double rint(double x);
double nearbyint(double x);
double erf(double x);
double pow(double x, double y);
double atan2(double x, double y);
double fmax(double x, double y);
double fmin(double x, double y);
double fmod(double x, double y);
double hypot(double x, double y);
long lrintf(float x);
long lroundf(float x);
long lrint(double x);
long lround(double x);
float frexpf(float x, int *e);
float ldexpf(float x, int e);
double frexp(double x, int *e);
double ldexp(double x, int e);
#endif
