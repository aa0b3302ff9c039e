#include <math.h>
/* kernel */
void E_4_6(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 6; gidx1++) {
      float val0 = data1[((gidx1*4)+gidx0)];
      data0[((gidx0*6)+gidx1)] = val0;
    }
  }
}
