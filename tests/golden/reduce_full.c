#include <math.h>
/* kernel */
void r_24(float* restrict data0, const float* restrict data1) {
  float acc0 = 0x0p+0f;
  for (int ridx0 = 0; ridx0 < 6; ridx0++) {
    float val0 = data1[(ridx0*4)];
    float alu0 = (acc0+val0);
    acc0 = alu0;
    float val1 = data1[((ridx0*4)+1)];
    float alu1 = (acc0+val1);
    acc0 = alu1;
    float val2 = data1[((ridx0*4)+2)];
    float alu2 = (acc0+val2);
    acc0 = alu2;
    float val3 = data1[((ridx0*4)+3)];
    float alu3 = (acc0+val3);
    acc0 = alu3;
  }
  data0[0] = acc0;
}
