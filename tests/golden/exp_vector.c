#include <math.h>

typedef float sg_float16 __attribute__((vector_size(64)));
typedef int sg_mask_float16 __attribute__((vector_size(64)));

static inline sg_float16 sg_float16_load(const float* p) { sg_float16 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float16_store(float* p, sg_float16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float16 sg_float16_max(sg_float16 a, sg_float16 b) { sg_mask_float16 m = (a != a) | (a > b); return (sg_float16)(((sg_mask_float16)a & m) | ((sg_mask_float16)b & ~m)); }

static inline sg_mask_float16 sg_mask_float16_from_bytes(const unsigned char* p) { unsigned char v __attribute__((vector_size(16))); __builtin_memcpy(&v, p, sizeof(v)); return __builtin_convertvector(v != 0, sg_mask_float16); }

static inline sg_float16 sg_float16_exp2(sg_float16 x) {
  sg_mask_float16 o = x > 128.0f, u = x < -151.0f;
  x = (sg_float16)(((sg_mask_float16)x & ~(o | u)) | (o & (sg_mask_float16)((sg_float16){} + 128.0f)) | (u & (sg_mask_float16)((sg_float16){} - 151.0f)));
  sg_float16 t = x + 0x1.8p+23f, f = x - (t - 0x1.8p+23f);
  sg_mask_float16 n = ((sg_mask_float16)t - 0x4b400000) & (sg_mask_float16)(x == x), k = n >> 1;
  sg_float16 p = f * 0x1.41fbbcp-13f + 0x1.5f3e54p-10f;
  p = p * f + 0x1.3b2d4cp-7f;
  p = p * f + 0x1.c6aee8p-5f;
  p = p * f + 0x1.ebfbdcp-3f;
  p = p * f + 0x1.62e43p-1f;
  p = p * f + 1.0f;
  return p * (sg_float16)((k + 127) << 23) * (sg_float16)((n - k + 127) << 23);
}

static inline sg_float16 sg_float16_sqrt(sg_float16 x) {
#if defined(__AVX512F__) && defined(__clang__)
#if __has_builtin(__builtin_elementwise_sqrt)
  return __builtin_elementwise_sqrt(x);
#else
  return __builtin_ia32_sqrtps512(x, 4);
#endif
#elif defined(__AVX512F__)
  return __builtin_ia32_sqrtps512_mask(x, x, (unsigned short)-1, 4);
#else
  for (int i = 0; i < 16; i++) x[i] = sqrtf(x[i]);
  return x;
#endif
}
/* kernel */
void E_64(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    sg_float16 val0 = sg_float16_load(data1+(gidx0*16));
    sg_float16 alu0 = (val0*((sg_float16){0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f,0x1.99999ap-4f}));
    sg_float16 alu1 = (alu0*((sg_float16){0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f,0x1.715476p+0f}));
    sg_float16 alu2 = sg_float16_exp2(alu1);
    sg_float16 val1 = sg_float16_load(data2+(gidx0*16));
    sg_float16 alu3 = (val1+((sg_float16){0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f,0x1p+0f}));
    sg_float16 alu4 = sg_float16_sqrt(alu3);
    sg_float16 alu5 = (alu2/alu4);
    sg_float16_store(data0+(gidx0*16), alu5);
  }
}
