#include <math.h>
/* kernel */
void E_4_4(unsigned char* restrict data0, const float* restrict data1, const float* restrict data2, const float* restrict data3) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 4; gidx1++) {
      float val0 = data1[((gidx0*4)+gidx1)];
      unsigned char alu0 = (val0<0x1.4p+2f);
      float val1 = data2[gidx1];
      float val2 = data3[((gidx0*4)+gidx1)];
      unsigned char alu1 = (val1<val2);
      unsigned char alu2 = (alu0<alu1);
      unsigned char alu3 = (alu1<alu0);
      unsigned char alu4 = (alu2||alu3);
      data0[((gidx0*4)+gidx1)] = alu4;
    }
  }
}
