#include <math.h>

typedef float sg_float16 __attribute__((vector_size(64)));
typedef int sg_mask_float16 __attribute__((vector_size(64)));

static inline sg_float16 sg_float16_load(const float* p) { sg_float16 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float16_store(float* p, sg_float16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float16 sg_float16_max(sg_float16 a, sg_float16 b) { sg_mask_float16 m = (a != a) | (a > b); return (sg_float16)(((sg_mask_float16)a & m) | ((sg_mask_float16)b & ~m)); }

static inline sg_mask_float16 sg_mask_float16_from_bytes(const unsigned char* p) { unsigned char v __attribute__((vector_size(16))); __builtin_memcpy(&v, p, sizeof(v)); return __builtin_convertvector(v != 0, sg_mask_float16); }

static inline float sg_float16_hadd(sg_float16 v) {
  typedef float sg_float_h8 __attribute__((vector_size(8 * sizeof(float))));
  sg_float_h8 lo8, hi8;
  __builtin_memcpy(&lo8, &v, sizeof(lo8));
  __builtin_memcpy(&hi8, (const char*)&v + sizeof(lo8), sizeof(hi8));
  lo8 = lo8 + hi8;
  typedef float sg_float_h4 __attribute__((vector_size(4 * sizeof(float))));
  sg_float_h4 lo4, hi4;
  __builtin_memcpy(&lo4, &lo8, sizeof(lo4));
  __builtin_memcpy(&hi4, (const char*)&lo8 + sizeof(lo4), sizeof(hi4));
  lo4 = lo4 + hi4;
  typedef float sg_float_h2 __attribute__((vector_size(2 * sizeof(float))));
  sg_float_h2 lo2, hi2;
  __builtin_memcpy(&lo2, &lo4, sizeof(lo2));
  __builtin_memcpy(&hi2, (const char*)&lo4 + sizeof(lo2), sizeof(hi2));
  lo2 = lo2 + hi2;
  return lo2[0] + lo2[1];
}
/* kernel */
void r_4_64(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    sg_float16 acc0 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 val0 = sg_float16_load(data1+(gidx0*64));
    sg_float16 alu0 = (acc0+val0);
    acc0 = alu0;
    sg_float16 val1 = sg_float16_load(data1+((gidx0*64)+16));
    sg_float16 alu1 = (acc0+val1);
    acc0 = alu1;
    sg_float16 val2 = sg_float16_load(data1+((gidx0*64)+32));
    sg_float16 alu2 = (acc0+val2);
    acc0 = alu2;
    sg_float16 val3 = sg_float16_load(data1+((gidx0*64)+48));
    sg_float16 alu3 = (acc0+val3);
    acc0 = alu3;
    float alu4 = sg_float16_hadd(acc0);
    data0[gidx0] = alu4;
  }
}
