#include <math.h>
/* kernel */
void r_6_4(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 6; gidx0++) {
    float acc0 = (-INFINITY);
    float val0 = data1[gidx0];
    float alu0 = (((acc0)!=(acc0))|((val0)!=(val0))?((acc0)+(val0)):(((acc0)>(val0))?(acc0):(val0)));
    acc0 = alu0;
    float val1 = data1[(gidx0+6)];
    float alu1 = (((acc0)!=(acc0))|((val1)!=(val1))?((acc0)+(val1)):(((acc0)>(val1))?(acc0):(val1)));
    acc0 = alu1;
    float val2 = data1[(gidx0+12)];
    float alu2 = (((acc0)!=(acc0))|((val2)!=(val2))?((acc0)+(val2)):(((acc0)>(val2))?(acc0):(val2)));
    acc0 = alu2;
    float val3 = data1[(gidx0+18)];
    float alu3 = (((acc0)!=(acc0))|((val3)!=(val3))?((acc0)+(val3)):(((acc0)>(val3))?(acc0):(val3)));
    acc0 = alu3;
    data0[gidx0] = acc0;
  }
}
