#include <math.h>

typedef float sg_float16 __attribute__((vector_size(64)));
typedef int sg_mask_float16 __attribute__((vector_size(64)));

static inline sg_float16 sg_float16_load(const float* p) { sg_float16 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float16_store(float* p, sg_float16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float16 sg_float16_max(sg_float16 a, sg_float16 b) { sg_mask_float16 m = (a != a) | (a > b); return (sg_float16)(((sg_mask_float16)a & m) | ((sg_mask_float16)b & ~m)); }
/* kernel */
void r_4_64(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    sg_float16 acc0 = ((sg_float16){}+(0x0p+0f));
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
    float alu4 = (acc0[0]+acc0[1]+acc0[2]+acc0[3]+acc0[4]+acc0[5]+acc0[6]+acc0[7]+acc0[8]+acc0[9]+acc0[10]+acc0[11]+acc0[12]+acc0[13]+acc0[14]+acc0[15]);
    data0[gidx0] = alu4;
  }
}
