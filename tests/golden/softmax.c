#include <math.h>
/* kernel */
void r_4_6(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    float acc0 = (-INFINITY);
    float val0 = data1[(gidx0*6)];
    float alu0 = (((acc0)!=(acc0))|((val0)!=(val0))?((acc0)+(val0)):(((acc0)>(val0))?(acc0):(val0)));
    acc0 = alu0;
    float val1 = data1[((gidx0*6)+1)];
    float alu1 = (((acc0)!=(acc0))|((val1)!=(val1))?((acc0)+(val1)):(((acc0)>(val1))?(acc0):(val1)));
    acc0 = alu1;
    float val2 = data1[((gidx0*6)+2)];
    float alu2 = (((acc0)!=(acc0))|((val2)!=(val2))?((acc0)+(val2)):(((acc0)>(val2))?(acc0):(val2)));
    acc0 = alu2;
    float val3 = data1[((gidx0*6)+3)];
    float alu3 = (((acc0)!=(acc0))|((val3)!=(val3))?((acc0)+(val3)):(((acc0)>(val3))?(acc0):(val3)));
    acc0 = alu3;
    float val4 = data1[((gidx0*6)+4)];
    float alu4 = (((acc0)!=(acc0))|((val4)!=(val4))?((acc0)+(val4)):(((acc0)>(val4))?(acc0):(val4)));
    acc0 = alu4;
    float val5 = data1[((gidx0*6)+5)];
    float alu5 = (((acc0)!=(acc0))|((val5)!=(val5))?((acc0)+(val5)):(((acc0)>(val5))?(acc0):(val5)));
    acc0 = alu5;
    data0[gidx0] = acc0;
  }
}

#include <math.h>

static inline float sg_exp2f(float x) {
  x = x > 128.0f ? 128.0f : x < -151.0f ? -151.0f : x;
  float t = x + 0x1.8p+23f, f = x - (t - 0x1.8p+23f);
  union { float f; int i; } sg_t = { t }, sg_two_k, sg_two_n_k;
  int n = x == x ? sg_t.i - 0x4b400000 : 0, k = n >> 1;
  float p = f * 0x1.41fbbcp-13f + 0x1.5f3e54p-10f;
  p = p * f + 0x1.3b2d4cp-7f;
  p = p * f + 0x1.c6aee8p-5f;
  p = p * f + 0x1.ebfbdcp-3f;
  p = p * f + 0x1.62e43p-1f;
  p = p * f + 1.0f;
  sg_two_k.i = (k + 127) << 23;
  sg_two_n_k.i = (n - k + 127) << 23;
  return p * sg_two_k.f * sg_two_n_k.f;
}
/* kernel */
void r_4_6(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    float acc0 = 0x0p+0f;
    float val0 = data1[(gidx0*6)];
    float val1 = data2[gidx0];
    float alu0 = (val0-val1);
    float alu1 = (alu0*0x1.715476p+0f);
    float alu2 = sg_exp2f(alu1);
    float alu3 = (acc0+alu2);
    acc0 = alu3;
    float val2 = data1[((gidx0*6)+1)];
    float alu4 = (val2-val1);
    float alu5 = (alu4*0x1.715476p+0f);
    float alu6 = sg_exp2f(alu5);
    float alu7 = (acc0+alu6);
    acc0 = alu7;
    float val3 = data1[((gidx0*6)+2)];
    float alu8 = (val3-val1);
    float alu9 = (alu8*0x1.715476p+0f);
    float alu10 = sg_exp2f(alu9);
    float alu11 = (acc0+alu10);
    acc0 = alu11;
    float val4 = data1[((gidx0*6)+3)];
    float alu12 = (val4-val1);
    float alu13 = (alu12*0x1.715476p+0f);
    float alu14 = sg_exp2f(alu13);
    float alu15 = (acc0+alu14);
    acc0 = alu15;
    float val5 = data1[((gidx0*6)+4)];
    float alu16 = (val5-val1);
    float alu17 = (alu16*0x1.715476p+0f);
    float alu18 = sg_exp2f(alu17);
    float alu19 = (acc0+alu18);
    acc0 = alu19;
    float val6 = data1[((gidx0*6)+5)];
    float alu20 = (val6-val1);
    float alu21 = (alu20*0x1.715476p+0f);
    float alu22 = sg_exp2f(alu21);
    float alu23 = (acc0+alu22);
    acc0 = alu23;
    data0[gidx0] = acc0;
  }
}

#include <math.h>

static inline float sg_exp2f(float x) {
  x = x > 128.0f ? 128.0f : x < -151.0f ? -151.0f : x;
  float t = x + 0x1.8p+23f, f = x - (t - 0x1.8p+23f);
  union { float f; int i; } sg_t = { t }, sg_two_k, sg_two_n_k;
  int n = x == x ? sg_t.i - 0x4b400000 : 0, k = n >> 1;
  float p = f * 0x1.41fbbcp-13f + 0x1.5f3e54p-10f;
  p = p * f + 0x1.3b2d4cp-7f;
  p = p * f + 0x1.c6aee8p-5f;
  p = p * f + 0x1.ebfbdcp-3f;
  p = p * f + 0x1.62e43p-1f;
  p = p * f + 1.0f;
  sg_two_k.i = (k + 127) << 23;
  sg_two_n_k.i = (n - k + 127) << 23;
  return p * sg_two_k.f * sg_two_n_k.f;
}
/* kernel */
void E_4_6(float* restrict data0, const float* restrict data1, const float* restrict data2, const float* restrict data3) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 6; gidx1++) {
      float val0 = data1[((gidx0*6)+gidx1)];
      float val1 = data2[gidx0];
      float alu0 = (val0-val1);
      float alu1 = (alu0*0x1.715476p+0f);
      float alu2 = sg_exp2f(alu1);
      float val2 = data3[gidx0];
      float alu3 = (alu2/val2);
      data0[((gidx0*6)+gidx1)] = alu3;
    }
  }
}
