#include <math.h>
void r_4_3_8(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 3; gidx1++) {
      float acc0 = 0x0p+0f;
      for (int ridx0 = 0; ridx0 < 8; ridx0++) {
        float val0 = data1[((gidx0*8)+ridx0)];
        float val1 = data2[((ridx0*3)+gidx1)];
        float alu0 = (val0*val1);
        float alu1 = (acc0+alu0);
        acc0 = alu1;
      }
      data0[((gidx0*3)+gidx1)] = acc0;
    }
  }
}
