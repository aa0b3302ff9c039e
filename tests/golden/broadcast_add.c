#include <math.h>
/* kernel */
void E_4_4(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 4; gidx1++) {
      float val0 = data1[((gidx0*4)+gidx1)];
      float val1 = data2[gidx1];
      float alu0 = (val0+val1);
      data0[((gidx0*4)+gidx1)] = alu0;
    }
  }
}
