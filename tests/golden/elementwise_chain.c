#include <math.h>

typedef float sg_float16 __attribute__((vector_size(64)));
typedef int sg_mask_float16 __attribute__((vector_size(64)));

static inline sg_float16 sg_float16_load(const float* p) { sg_float16 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float16_store(float* p, sg_float16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float16 sg_float16_max(sg_float16 a, sg_float16 b) { sg_mask_float16 m = (a != a) | (a > b); return (sg_float16)(((sg_mask_float16)a & m) | ((sg_mask_float16)b & ~m)); }

static inline sg_mask_float16 sg_mask_float16_from_bytes(const unsigned char* p) { unsigned char v __attribute__((vector_size(16))); __builtin_memcpy(&v, p, sizeof(v)); return __builtin_convertvector(v != 0, sg_mask_float16); }
/* kernel */
void E_16(float* restrict data0, const float* restrict data1, const float* restrict data2, const float* restrict data3) {
  sg_float16 val0 = sg_float16_load(data1+0);
  sg_float16 val1 = sg_float16_load(data2+0);
  sg_float16 alu0 = (val0*val1);
  sg_float16 val2 = sg_float16_load(data3+0);
  sg_float16 alu1 = (alu0+val2);
  sg_float16 alu2 = sg_float16_max(alu1,((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f}));
  sg_float16_store(data0+0, alu2);
}
