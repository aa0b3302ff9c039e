#include <math.h>
void r_6_4(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 6; gidx0++) {
    float acc0 = (-INFINITY);
    for (int ridx0 = 0; ridx0 < 4; ridx0++) {
      float val0 = data1[((ridx0*6)+gidx0)];
      float alu0 = (((acc0)!=(acc0)||(acc0)>(val0))?(acc0):(val0));
      acc0 = alu0;
    }
    data0[gidx0] = acc0;
  }
}
