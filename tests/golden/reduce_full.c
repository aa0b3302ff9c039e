#include <math.h>

typedef float sg_float8 __attribute__((vector_size(32)));
typedef int sg_mask_float8 __attribute__((vector_size(32)));

static inline sg_float8 sg_float8_load(const float* p) { sg_float8 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float8_store(float* p, sg_float8 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float8 sg_float8_max(sg_float8 a, sg_float8 b) { sg_mask_float8 m = (a != a) | (a > b); return (sg_float8)(((sg_mask_float8)a & m) | ((sg_mask_float8)b & ~m)); }

static inline sg_mask_float8 sg_mask_float8_from_bytes(const unsigned char* p) { unsigned char v __attribute__((vector_size(8))); __builtin_memcpy(&v, p, sizeof(v)); return __builtin_convertvector(v != 0, sg_mask_float8); }

static inline float sg_float8_hadd(sg_float8 v) {
  typedef float sg_float_h4 __attribute__((vector_size(4 * sizeof(float))));
  sg_float_h4 lo4, hi4;
  __builtin_memcpy(&lo4, &v, sizeof(lo4));
  __builtin_memcpy(&hi4, (const char*)&v + sizeof(lo4), sizeof(hi4));
  lo4 = lo4 + hi4;
  typedef float sg_float_h2 __attribute__((vector_size(2 * sizeof(float))));
  sg_float_h2 lo2, hi2;
  __builtin_memcpy(&lo2, &lo4, sizeof(lo2));
  __builtin_memcpy(&hi2, (const char*)&lo4 + sizeof(lo2), sizeof(hi2));
  lo2 = lo2 + hi2;
  return lo2[0] + lo2[1];
}
/* kernel */
void r_24(float* restrict data0, const float* restrict data1) {
  sg_float8 acc0 = ((sg_float8){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
  sg_float8 val0 = sg_float8_load(data1+0);
  sg_float8 alu0 = (acc0+val0);
  acc0 = alu0;
  sg_float8 val1 = sg_float8_load(data1+8);
  sg_float8 alu1 = (acc0+val1);
  acc0 = alu1;
  sg_float8 val2 = sg_float8_load(data1+16);
  sg_float8 alu2 = (acc0+val2);
  acc0 = alu2;
  float alu3 = sg_float8_hadd(acc0);
  data0[0] = alu3;
}
