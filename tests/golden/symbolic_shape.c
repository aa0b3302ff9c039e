#include <math.h>
/* kernel */
void E_n(float* restrict data0, const float* restrict data1, const int var0) {
  for (int gidx0 = 0; gidx0 < (var0*4); gidx0++) {
    float val0 = data1[gidx0];
    float alu0 = (val0*0x1p+1f);
    data0[gidx0] = alu0;
  }
}
