#include <math.h>
/* kernel */
void E_3_4(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 3; gidx0++) {
    for (int gidx1 = 0; gidx1 < 4; gidx1++) {
      float val0 = data1[((gidx0*12)+gidx1+1)];
      data0[((gidx0*4)+gidx1)] = val0;
    }
  }
}
