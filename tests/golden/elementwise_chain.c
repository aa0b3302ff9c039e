#include <math.h>
void E_16(float* restrict data0, const float* restrict data1, const float* restrict data2, const float* restrict data3) {
  for (int gidx0 = 0; gidx0 < 16; gidx0++) {
    float val0 = data1[gidx0];
    float val1 = data2[gidx0];
    float alu0 = (val0*val1);
    float val2 = data3[gidx0];
    float alu1 = (alu0+val2);
    float alu2 = (((alu1)!=(alu1)||(alu1)>(0x0p+0f))?(alu1):(0x0p+0f));
    data0[gidx0] = alu2;
  }
}
