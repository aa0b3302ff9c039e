#include <math.h>

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

static inline sg_mask_float16 sg_mask_float16_from_bytes(const unsigned char* p) { unsigned char v __attribute__((vector_size(16))); __builtin_memcpy(&v, p, sizeof(v)); return __builtin_convertvector(v != 0, sg_mask_float16); }

static inline sg_float16 sg_float16_fma(sg_float16 a, sg_float16 b, sg_float16 c) {
#if defined(__AVX512F__) && defined(__clang__)
#if __has_builtin(__builtin_elementwise_fma)
  return __builtin_elementwise_fma(a, b, c);
#else
  return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4);
#endif
#elif defined(__AVX512F__)
  return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4);
#else
  return a * b + c;
#endif
}
/* kernel */
void r_32_32_32(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int gidx1 = 0; gidx1 < 4; gidx1++) {
    sg_float16 acc0 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc1 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc2 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc3 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc4 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc5 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc6 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc7 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc8 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc9 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc10 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc11 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc12 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc13 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc14 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    sg_float16 acc15 = ((sg_float16){0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f,0x0p+0f});
    for (int ridx0 = 0; ridx0 < 8; ridx0++) {
      float val0 = data1[((gidx1*256)+(ridx0*4))];
      sg_float16 val1 = sg_float16_load(data2+(ridx0*128));
      sg_float16 alu0 = sg_float16_fma(((sg_float16){val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0}),val1,acc0);
      acc0 = alu0;
      float val2 = data1[((gidx1*256)+(ridx0*4)+1)];
      sg_float16 val3 = sg_float16_load(data2+((ridx0*128)+32));
      sg_float16 alu1 = sg_float16_fma(((sg_float16){val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2}),val3,acc0);
      acc0 = alu1;
      float val4 = data1[((gidx1*256)+(ridx0*4)+2)];
      sg_float16 val5 = sg_float16_load(data2+((ridx0*128)+64));
      sg_float16 alu2 = sg_float16_fma(((sg_float16){val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4}),val5,acc0);
      acc0 = alu2;
      float val6 = data1[((gidx1*256)+(ridx0*4)+3)];
      sg_float16 val7 = sg_float16_load(data2+((ridx0*128)+96));
      sg_float16 alu3 = sg_float16_fma(((sg_float16){val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6}),val7,acc0);
      acc0 = alu3;
      float val8 = data1[((gidx1*256)+(ridx0*4)+128)];
      sg_float16 alu4 = sg_float16_fma(((sg_float16){val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8}),val1,acc1);
      acc1 = alu4;
      float val9 = data1[((gidx1*256)+(ridx0*4)+129)];
      sg_float16 alu5 = sg_float16_fma(((sg_float16){val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9}),val3,acc1);
      acc1 = alu5;
      float val10 = data1[((gidx1*256)+(ridx0*4)+130)];
      sg_float16 alu6 = sg_float16_fma(((sg_float16){val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10}),val5,acc1);
      acc1 = alu6;
      float val11 = data1[((gidx1*256)+(ridx0*4)+131)];
      sg_float16 alu7 = sg_float16_fma(((sg_float16){val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11}),val7,acc1);
      acc1 = alu7;
      sg_float16 val12 = sg_float16_load(data2+((ridx0*128)+16));
      sg_float16 alu8 = sg_float16_fma(((sg_float16){val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0,val0}),val12,acc2);
      acc2 = alu8;
      sg_float16 val13 = sg_float16_load(data2+((ridx0*128)+48));
      sg_float16 alu9 = sg_float16_fma(((sg_float16){val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2,val2}),val13,acc2);
      acc2 = alu9;
      sg_float16 val14 = sg_float16_load(data2+((ridx0*128)+80));
      sg_float16 alu10 = sg_float16_fma(((sg_float16){val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4,val4}),val14,acc2);
      acc2 = alu10;
      sg_float16 val15 = sg_float16_load(data2+((ridx0*128)+112));
      sg_float16 alu11 = sg_float16_fma(((sg_float16){val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6,val6}),val15,acc2);
      acc2 = alu11;
      sg_float16 alu12 = sg_float16_fma(((sg_float16){val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8,val8}),val12,acc3);
      acc3 = alu12;
      sg_float16 alu13 = sg_float16_fma(((sg_float16){val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9,val9}),val13,acc3);
      acc3 = alu13;
      sg_float16 alu14 = sg_float16_fma(((sg_float16){val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10,val10}),val14,acc3);
      acc3 = alu14;
      sg_float16 alu15 = sg_float16_fma(((sg_float16){val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11,val11}),val15,acc3);
      acc3 = alu15;
      float val16 = data1[((gidx1*256)+(ridx0*4)+32)];
      sg_float16 alu16 = sg_float16_fma(((sg_float16){val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16}),val1,acc4);
      acc4 = alu16;
      float val17 = data1[((gidx1*256)+(ridx0*4)+33)];
      sg_float16 alu17 = sg_float16_fma(((sg_float16){val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17}),val3,acc4);
      acc4 = alu17;
      float val18 = data1[((gidx1*256)+(ridx0*4)+34)];
      sg_float16 alu18 = sg_float16_fma(((sg_float16){val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18}),val5,acc4);
      acc4 = alu18;
      float val19 = data1[((gidx1*256)+(ridx0*4)+35)];
      sg_float16 alu19 = sg_float16_fma(((sg_float16){val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19}),val7,acc4);
      acc4 = alu19;
      float val20 = data1[((gidx1*256)+(ridx0*4)+160)];
      sg_float16 alu20 = sg_float16_fma(((sg_float16){val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20}),val1,acc5);
      acc5 = alu20;
      float val21 = data1[((gidx1*256)+(ridx0*4)+161)];
      sg_float16 alu21 = sg_float16_fma(((sg_float16){val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21}),val3,acc5);
      acc5 = alu21;
      float val22 = data1[((gidx1*256)+(ridx0*4)+162)];
      sg_float16 alu22 = sg_float16_fma(((sg_float16){val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22}),val5,acc5);
      acc5 = alu22;
      float val23 = data1[((gidx1*256)+(ridx0*4)+163)];
      sg_float16 alu23 = sg_float16_fma(((sg_float16){val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23}),val7,acc5);
      acc5 = alu23;
      sg_float16 alu24 = sg_float16_fma(((sg_float16){val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16,val16}),val12,acc6);
      acc6 = alu24;
      sg_float16 alu25 = sg_float16_fma(((sg_float16){val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17,val17}),val13,acc6);
      acc6 = alu25;
      sg_float16 alu26 = sg_float16_fma(((sg_float16){val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18,val18}),val14,acc6);
      acc6 = alu26;
      sg_float16 alu27 = sg_float16_fma(((sg_float16){val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19,val19}),val15,acc6);
      acc6 = alu27;
      sg_float16 alu28 = sg_float16_fma(((sg_float16){val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20,val20}),val12,acc7);
      acc7 = alu28;
      sg_float16 alu29 = sg_float16_fma(((sg_float16){val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21,val21}),val13,acc7);
      acc7 = alu29;
      sg_float16 alu30 = sg_float16_fma(((sg_float16){val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22,val22}),val14,acc7);
      acc7 = alu30;
      sg_float16 alu31 = sg_float16_fma(((sg_float16){val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23,val23}),val15,acc7);
      acc7 = alu31;
      float val24 = data1[((gidx1*256)+(ridx0*4)+64)];
      sg_float16 alu32 = sg_float16_fma(((sg_float16){val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24}),val1,acc8);
      acc8 = alu32;
      float val25 = data1[((gidx1*256)+(ridx0*4)+65)];
      sg_float16 alu33 = sg_float16_fma(((sg_float16){val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25}),val3,acc8);
      acc8 = alu33;
      float val26 = data1[((gidx1*256)+(ridx0*4)+66)];
      sg_float16 alu34 = sg_float16_fma(((sg_float16){val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26}),val5,acc8);
      acc8 = alu34;
      float val27 = data1[((gidx1*256)+(ridx0*4)+67)];
      sg_float16 alu35 = sg_float16_fma(((sg_float16){val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27}),val7,acc8);
      acc8 = alu35;
      float val28 = data1[((gidx1*256)+(ridx0*4)+192)];
      sg_float16 alu36 = sg_float16_fma(((sg_float16){val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28}),val1,acc9);
      acc9 = alu36;
      float val29 = data1[((gidx1*256)+(ridx0*4)+193)];
      sg_float16 alu37 = sg_float16_fma(((sg_float16){val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29}),val3,acc9);
      acc9 = alu37;
      float val30 = data1[((gidx1*256)+(ridx0*4)+194)];
      sg_float16 alu38 = sg_float16_fma(((sg_float16){val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30}),val5,acc9);
      acc9 = alu38;
      float val31 = data1[((gidx1*256)+(ridx0*4)+195)];
      sg_float16 alu39 = sg_float16_fma(((sg_float16){val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31}),val7,acc9);
      acc9 = alu39;
      sg_float16 alu40 = sg_float16_fma(((sg_float16){val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24,val24}),val12,acc10);
      acc10 = alu40;
      sg_float16 alu41 = sg_float16_fma(((sg_float16){val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25,val25}),val13,acc10);
      acc10 = alu41;
      sg_float16 alu42 = sg_float16_fma(((sg_float16){val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26,val26}),val14,acc10);
      acc10 = alu42;
      sg_float16 alu43 = sg_float16_fma(((sg_float16){val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27,val27}),val15,acc10);
      acc10 = alu43;
      sg_float16 alu44 = sg_float16_fma(((sg_float16){val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28,val28}),val12,acc11);
      acc11 = alu44;
      sg_float16 alu45 = sg_float16_fma(((sg_float16){val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29,val29}),val13,acc11);
      acc11 = alu45;
      sg_float16 alu46 = sg_float16_fma(((sg_float16){val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30,val30}),val14,acc11);
      acc11 = alu46;
      sg_float16 alu47 = sg_float16_fma(((sg_float16){val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31,val31}),val15,acc11);
      acc11 = alu47;
      float val32 = data1[((gidx1*256)+(ridx0*4)+96)];
      sg_float16 alu48 = sg_float16_fma(((sg_float16){val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32}),val1,acc12);
      acc12 = alu48;
      float val33 = data1[((gidx1*256)+(ridx0*4)+97)];
      sg_float16 alu49 = sg_float16_fma(((sg_float16){val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33}),val3,acc12);
      acc12 = alu49;
      float val34 = data1[((gidx1*256)+(ridx0*4)+98)];
      sg_float16 alu50 = sg_float16_fma(((sg_float16){val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34}),val5,acc12);
      acc12 = alu50;
      float val35 = data1[((gidx1*256)+(ridx0*4)+99)];
      sg_float16 alu51 = sg_float16_fma(((sg_float16){val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35}),val7,acc12);
      acc12 = alu51;
      float val36 = data1[((gidx1*256)+(ridx0*4)+224)];
      sg_float16 alu52 = sg_float16_fma(((sg_float16){val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36}),val1,acc13);
      acc13 = alu52;
      float val37 = data1[((gidx1*256)+(ridx0*4)+225)];
      sg_float16 alu53 = sg_float16_fma(((sg_float16){val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37}),val3,acc13);
      acc13 = alu53;
      float val38 = data1[((gidx1*256)+(ridx0*4)+226)];
      sg_float16 alu54 = sg_float16_fma(((sg_float16){val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38}),val5,acc13);
      acc13 = alu54;
      float val39 = data1[((gidx1*256)+(ridx0*4)+227)];
      sg_float16 alu55 = sg_float16_fma(((sg_float16){val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39}),val7,acc13);
      acc13 = alu55;
      sg_float16 alu56 = sg_float16_fma(((sg_float16){val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32,val32}),val12,acc14);
      acc14 = alu56;
      sg_float16 alu57 = sg_float16_fma(((sg_float16){val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33,val33}),val13,acc14);
      acc14 = alu57;
      sg_float16 alu58 = sg_float16_fma(((sg_float16){val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34,val34}),val14,acc14);
      acc14 = alu58;
      sg_float16 alu59 = sg_float16_fma(((sg_float16){val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35,val35}),val15,acc14);
      acc14 = alu59;
      sg_float16 alu60 = sg_float16_fma(((sg_float16){val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36,val36}),val12,acc15);
      acc15 = alu60;
      sg_float16 alu61 = sg_float16_fma(((sg_float16){val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37,val37}),val13,acc15);
      acc15 = alu61;
      sg_float16 alu62 = sg_float16_fma(((sg_float16){val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38,val38}),val14,acc15);
      acc15 = alu62;
      sg_float16 alu63 = sg_float16_fma(((sg_float16){val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39,val39}),val15,acc15);
      acc15 = alu63;
    }
    sg_float16_store(data0+(gidx1*256), acc0);
    sg_float16_store(data0+((gidx1*256)+128), acc1);
    sg_float16_store(data0+((gidx1*256)+16), acc2);
    sg_float16_store(data0+((gidx1*256)+144), acc3);
    sg_float16_store(data0+((gidx1*256)+32), acc4);
    sg_float16_store(data0+((gidx1*256)+160), acc5);
    sg_float16_store(data0+((gidx1*256)+48), acc6);
    sg_float16_store(data0+((gidx1*256)+176), acc7);
    sg_float16_store(data0+((gidx1*256)+64), acc8);
    sg_float16_store(data0+((gidx1*256)+192), acc9);
    sg_float16_store(data0+((gidx1*256)+80), acc10);
    sg_float16_store(data0+((gidx1*256)+208), acc11);
    sg_float16_store(data0+((gidx1*256)+96), acc12);
    sg_float16_store(data0+((gidx1*256)+224), acc13);
    sg_float16_store(data0+((gidx1*256)+112), acc14);
    sg_float16_store(data0+((gidx1*256)+240), acc15);
  }
}
