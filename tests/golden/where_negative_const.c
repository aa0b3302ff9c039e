#include <math.h>
/* kernel */
void E_4_4(float* restrict data0, const float* restrict data1, const float* restrict data2, const float* restrict data3) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 4; gidx1++) {
      float val0 = data1[((gidx0*4)+gidx1)];
      float val1 = data2[gidx1];
      unsigned char alu0 = (val0<val1);
      float val2 = data3[((gidx0*4)+gidx1)];
      float alu1 = (alu0?val2:(-0x1.8p+0f));
      data0[((gidx0*4)+gidx1)] = alu1;
    }
  }
}
