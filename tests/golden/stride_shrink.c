#include <math.h>

typedef float sg_float4 __attribute__((vector_size(16)));
typedef int sg_mask_float4 __attribute__((vector_size(16)));

static inline sg_float4 sg_float4_load(const float* p) { sg_float4 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float4_store(float* p, sg_float4 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float4 sg_float4_max(sg_float4 a, sg_float4 b) { sg_mask_float4 m = (a != a) | (a > b); return (sg_float4)(((sg_mask_float4)a & m) | ((sg_mask_float4)b & ~m)); }

static inline sg_mask_float4 sg_mask_float4_from_bytes(const unsigned char* p) { unsigned char v __attribute__((vector_size(4))); __builtin_memcpy(&v, p, sizeof(v)); return __builtin_convertvector(v != 0, sg_mask_float4); }
/* kernel */
void E_3_4(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 3; gidx0++) {
    sg_float4 val0 = sg_float4_load(data1+((gidx0*12)+1));
    sg_float4_store(data0+(gidx0*4), val0);
  }
}
