#include <math.h>
/* kernel */
void r_4_6(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    float acc0 = (-INFINITY);
    float val0 = data1[(gidx0*6)];
    float alu0 = (((acc0)!=(acc0)||(acc0)>(val0))?(acc0):(val0));
    acc0 = alu0;
    float val1 = data1[((gidx0*6)+1)];
    float alu1 = (((acc0)!=(acc0)||(acc0)>(val1))?(acc0):(val1));
    acc0 = alu1;
    float val2 = data1[((gidx0*6)+2)];
    float alu2 = (((acc0)!=(acc0)||(acc0)>(val2))?(acc0):(val2));
    acc0 = alu2;
    float val3 = data1[((gidx0*6)+3)];
    float alu3 = (((acc0)!=(acc0)||(acc0)>(val3))?(acc0):(val3));
    acc0 = alu3;
    float val4 = data1[((gidx0*6)+4)];
    float alu4 = (((acc0)!=(acc0)||(acc0)>(val4))?(acc0):(val4));
    acc0 = alu4;
    float val5 = data1[((gidx0*6)+5)];
    float alu5 = (((acc0)!=(acc0)||(acc0)>(val5))?(acc0):(val5));
    acc0 = alu5;
    data0[gidx0] = acc0;
  }
}

#include <math.h>
/* kernel */
void r_4_6(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    float acc0 = 0x0p+0f;
    float val0 = data1[(gidx0*6)];
    float val1 = data2[gidx0];
    float alu0 = (val0-val1);
    float alu1 = (alu0*0x1.715476p+0f);
    float alu2 = exp2f(alu1);
    float alu3 = (acc0+alu2);
    acc0 = alu3;
    float val2 = data1[((gidx0*6)+1)];
    float alu4 = (val2-val1);
    float alu5 = (alu4*0x1.715476p+0f);
    float alu6 = exp2f(alu5);
    float alu7 = (acc0+alu6);
    acc0 = alu7;
    float val3 = data1[((gidx0*6)+2)];
    float alu8 = (val3-val1);
    float alu9 = (alu8*0x1.715476p+0f);
    float alu10 = exp2f(alu9);
    float alu11 = (acc0+alu10);
    acc0 = alu11;
    float val4 = data1[((gidx0*6)+3)];
    float alu12 = (val4-val1);
    float alu13 = (alu12*0x1.715476p+0f);
    float alu14 = exp2f(alu13);
    float alu15 = (acc0+alu14);
    acc0 = alu15;
    float val5 = data1[((gidx0*6)+4)];
    float alu16 = (val5-val1);
    float alu17 = (alu16*0x1.715476p+0f);
    float alu18 = exp2f(alu17);
    float alu19 = (acc0+alu18);
    acc0 = alu19;
    float val6 = data1[((gidx0*6)+5)];
    float alu20 = (val6-val1);
    float alu21 = (alu20*0x1.715476p+0f);
    float alu22 = exp2f(alu21);
    float alu23 = (acc0+alu22);
    acc0 = alu23;
    data0[gidx0] = acc0;
  }
}

#include <math.h>
/* kernel */
void E_4_6(float* restrict data0, const float* restrict data1, const float* restrict data2, const float* restrict data3) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 6; gidx1++) {
      float val0 = data1[((gidx0*6)+gidx1)];
      float val1 = data2[gidx0];
      float alu0 = (val0-val1);
      float alu1 = (alu0*0x1.715476p+0f);
      float alu2 = exp2f(alu1);
      float val2 = data3[gidx0];
      float alu3 = (alu2/val2);
      data0[((gidx0*6)+gidx1)] = alu3;
    }
  }
}
