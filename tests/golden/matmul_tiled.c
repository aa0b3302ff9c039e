#include <math.h>

#if defined(__SSE__)
#include <immintrin.h>
#endif

#if defined(__FMA__) || defined(__aarch64__)
#define sg_fmaf(a, b, c) __builtin_fmaf(a, b, c)
#define sg_fma(a, b, c) __builtin_fma(a, b, c)
#else
#define sg_fmaf(a, b, c) ((a) * (b) + (c))
#define sg_fma(a, b, c) ((a) * (b) + (c))
#endif

typedef float sg_float16 __attribute__((vector_size(64)));
typedef int sg_mask_float16 __attribute__((vector_size(64)));

static inline sg_float16 sg_float16_load(const float* p) { sg_float16 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float16_store(float* p, sg_float16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float16 sg_float16_max(sg_float16 a, sg_float16 b) { sg_mask_float16 m = (a != a) | (a > b); return (sg_float16)(((sg_mask_float16)a & m) | ((sg_mask_float16)b & ~m)); }

static inline sg_float16 sg_float16_fma(sg_float16 a, sg_float16 b, sg_float16 c) {
#if defined(__AVX512F__)
  return (sg_float16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#else
  return a * b + c;
#endif
}

typedef void (*sg_body_fn)(void*, int, int);
typedef void (*sg_parallel_fn)(sg_body_fn, void*, int);
sg_parallel_fn sg_parallel_for = 0; /* set by the runtime after loading; unset: one thread */
/* kernel */
struct r_32_32_32_args { float* data0; const float* data1; const float* data2; };
static void r_32_32_32_body(void* sg_ctx, int sg_start, int sg_end) {
  struct r_32_32_32_args* sg_args = (struct r_32_32_32_args*)sg_ctx;
  float* restrict data0 = sg_args->data0;
  const float* restrict data1 = sg_args->data1;
  const float* restrict data2 = sg_args->data2;
  for (int gidx0 = sg_start; gidx0 < sg_end; gidx0++) {
    sg_float16 acc0 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc1 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc2 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc3 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc4 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc5 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc6 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc7 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    for (int ridx0 = 0; ridx0 < 8; ridx0++) {
      float val0 = data1[((gidx0*128)+(ridx0*4))];
      sg_float16 val1 = sg_float16_load(data2+(ridx0*128));
      sg_float16 alu0 = sg_float16_fma(((sg_float16){val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0}),val1,acc0);
      acc0 = alu0;
      float val2 = data1[((gidx0*128)+(ridx0*4)+1)];
      sg_float16 val3 = sg_float16_load(data2+((ridx0*128)+32));
      sg_float16 alu1 = sg_float16_fma(((sg_float16){val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2}),val3,acc0);
      acc0 = alu1;
      float val4 = data1[((gidx0*128)+(ridx0*4)+2)];
      sg_float16 val5 = sg_float16_load(data2+((ridx0*128)+64));
      sg_float16 alu2 = sg_float16_fma(((sg_float16){val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4}),val5,acc0);
      acc0 = alu2;
      float val6 = data1[((gidx0*128)+(ridx0*4)+3)];
      sg_float16 val7 = sg_float16_load(data2+((ridx0*128)+96));
      sg_float16 alu3 = sg_float16_fma(((sg_float16){val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6}),val7,acc0);
      acc0 = alu3;
      sg_float16 val8 = sg_float16_load(data2+((ridx0*128)+16));
      sg_float16 alu4 = sg_float16_fma(((sg_float16){val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0}),val8,acc1);
      acc1 = alu4;
      sg_float16 val9 = sg_float16_load(data2+((ridx0*128)+48));
      sg_float16 alu5 = sg_float16_fma(((sg_float16){val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2}),val9,acc1);
      acc1 = alu5;
      sg_float16 val10 = sg_float16_load(data2+((ridx0*128)+80));
      sg_float16 alu6 = sg_float16_fma(((sg_float16){val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4}),val10,acc1);
      acc1 = alu6;
      sg_float16 val11 = sg_float16_load(data2+((ridx0*128)+112));
      sg_float16 alu7 = sg_float16_fma(((sg_float16){val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6}),val11,acc1);
      acc1 = alu7;
      float val12 = data1[((gidx0*128)+(ridx0*4)+32)];
      sg_float16 alu8 = sg_float16_fma(((sg_float16){val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12}),val1,acc2);
      acc2 = alu8;
      float val13 = data1[((gidx0*128)+(ridx0*4)+33)];
      sg_float16 alu9 = sg_float16_fma(((sg_float16){val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13}),val3,acc2);
      acc2 = alu9;
      float val14 = data1[((gidx0*128)+(ridx0*4)+34)];
      sg_float16 alu10 = sg_float16_fma(((sg_float16){val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14}),val5,acc2);
      acc2 = alu10;
      float val15 = data1[((gidx0*128)+(ridx0*4)+35)];
      sg_float16 alu11 = sg_float16_fma(((sg_float16){val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15}),val7,acc2);
      acc2 = alu11;
      sg_float16 alu12 = sg_float16_fma(((sg_float16){val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12,val12}),val8,acc3);
      acc3 = alu12;
      sg_float16 alu13 = sg_float16_fma(((sg_float16){val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13,val13}),val9,acc3);
      acc3 = alu13;
      sg_float16 alu14 = sg_float16_fma(((sg_float16){val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14,val14}),val10,acc3);
      acc3 = alu14;
      sg_float16 alu15 = sg_float16_fma(((sg_float16){val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15,val15}),val11,acc3);
      acc3 = alu15;
      float val16 = data1[((gidx0*128)+(ridx0*4)+64)];
      sg_float16 alu16 = sg_float16_fma(((sg_float16){val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16}),val1,acc4);
      acc4 = alu16;
      float val17 = data1[((gidx0*128)+(ridx0*4)+65)];
      sg_float16 alu17 = sg_float16_fma(((sg_float16){val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17}),val3,acc4);
      acc4 = alu17;
      float val18 = data1[((gidx0*128)+(ridx0*4)+66)];
      sg_float16 alu18 = sg_float16_fma(((sg_float16){val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18}),val5,acc4);
      acc4 = alu18;
      float val19 = data1[((gidx0*128)+(ridx0*4)+67)];
      sg_float16 alu19 = sg_float16_fma(((sg_float16){val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19}),val7,acc4);
      acc4 = alu19;
      sg_float16 alu20 = sg_float16_fma(((sg_float16){val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16}),val8,acc5);
      acc5 = alu20;
      sg_float16 alu21 = sg_float16_fma(((sg_float16){val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17}),val9,acc5);
      acc5 = alu21;
      sg_float16 alu22 = sg_float16_fma(((sg_float16){val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18}),val10,acc5);
      acc5 = alu22;
      sg_float16 alu23 = sg_float16_fma(((sg_float16){val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19}),val11,acc5);
      acc5 = alu23;
      float val20 = data1[((gidx0*128)+(ridx0*4)+96)];
      sg_float16 alu24 = sg_float16_fma(((sg_float16){val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20}),val1,acc6);
      acc6 = alu24;
      float val21 = data1[((gidx0*128)+(ridx0*4)+97)];
      sg_float16 alu25 = sg_float16_fma(((sg_float16){val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21}),val3,acc6);
      acc6 = alu25;
      float val22 = data1[((gidx0*128)+(ridx0*4)+98)];
      sg_float16 alu26 = sg_float16_fma(((sg_float16){val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22}),val5,acc6);
      acc6 = alu26;
      float val23 = data1[((gidx0*128)+(ridx0*4)+99)];
      sg_float16 alu27 = sg_float16_fma(((sg_float16){val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23}),val7,acc6);
      acc6 = alu27;
      sg_float16 alu28 = sg_float16_fma(((sg_float16){val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20}),val8,acc7);
      acc7 = alu28;
      sg_float16 alu29 = sg_float16_fma(((sg_float16){val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21}),val9,acc7);
      acc7 = alu29;
      sg_float16 alu30 = sg_float16_fma(((sg_float16){val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22}),val10,acc7);
      acc7 = alu30;
      sg_float16 alu31 = sg_float16_fma(((sg_float16){val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23}),val11,acc7);
      acc7 = alu31;
    }
    sg_float16_store(data0+(gidx0*128), acc0);
    sg_float16_store(data0+((gidx0*128)+16), acc1);
    sg_float16_store(data0+((gidx0*128)+32), acc2);
    sg_float16_store(data0+((gidx0*128)+48), acc3);
    sg_float16_store(data0+((gidx0*128)+64), acc4);
    sg_float16_store(data0+((gidx0*128)+80), acc5);
    sg_float16_store(data0+((gidx0*128)+96), acc6);
    sg_float16_store(data0+((gidx0*128)+112), acc7);
  }
}
void r_32_32_32(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  struct r_32_32_32_args sg_args = { data0, data1, data2 };
  if (sg_parallel_for) sg_parallel_for(r_32_32_32_body, &sg_args, 8);
  else r_32_32_32_body(&sg_args, 0, 8);
}
