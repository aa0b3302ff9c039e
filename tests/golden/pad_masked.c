#include <math.h>
/* kernel */
void E_6_6(float* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 6; gidx0++) {
    for (int gidx1 = 0; gidx1 < 6; gidx1++) {
      float val0 = (((0<gidx0)&&(gidx0<5)&&(1<gidx1))?data1[((gidx0*4)+gidx1+-6)]:0x0p+0f);
      float alu0 = (val0*0x1.8p+1f);
      data0[((gidx0*6)+gidx1)] = alu0;
    }
  }
}
