#include <math.h>

typedef float sg_float4 __attribute__((vector_size(16)));
typedef int sg_mask_float4 __attribute__((vector_size(16)));

static inline sg_float4 sg_float4_load(const float* p) { sg_float4 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float4_store(float* p, sg_float4 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float4 sg_float4_max(sg_float4 a, sg_float4 b) { sg_mask_float4 m = (a != a) | (a > b); return (sg_float4)(((sg_mask_float4)a & m) | ((sg_mask_float4)b & ~m)); }

static inline sg_mask_float4 sg_mask_float4_from_bytes(const unsigned char* p) { unsigned char v __attribute__((vector_size(4))); __builtin_memcpy(&v, p, sizeof(v)); return __builtin_convertvector(v != 0, sg_mask_float4); }
/* kernel */
void E_4_4(float* restrict data0, const float* restrict data1, const float* restrict data2, const float* restrict data3) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    sg_float4 val0 = sg_float4_load(data1+(gidx0*4));
    sg_float4 val1 = sg_float4_load(data2+0);
    sg_mask_float4 alu0 = (val0<val1);
    sg_float4 val2 = sg_float4_load(data3+(gidx0*4));
    sg_float4 alu1 = ((sg_float4)(((sg_mask_float4)val2&alu0)|((sg_mask_float4)((sg_float4){(-0x1.8p+0f),(-0x1.8p+0f),(-0x1.8p+0f),(-0x1.8p+0f)})&~alu0)));
    sg_float4_store(data0+(gidx0*4), alu1);
  }
}
