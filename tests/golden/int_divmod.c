#include <math.h>
/* kernel */
void E_4_4(int* restrict data0, const int* restrict data1, const int* restrict data2) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 4; gidx1++) {
      int val0 = data1[((gidx0*4)+gidx1)];
      int val1 = data2[gidx1];
      int alu0 = ((val1)==0?0:(int)((long long)val0%(long long)val1));
      unsigned char alu1 = (alu0<0);
      unsigned char alu2 = (0<alu0);
      unsigned char alu3 = (alu1||alu2);
      unsigned char alu4 = (val1<0);
      unsigned char alu5 = (alu1<alu4);
      unsigned char alu6 = (alu4<alu1);
      unsigned char alu7 = (alu5||alu6);
      unsigned char alu8 = (alu3&&alu7);
      int alu9 = ((val1)==0?0:(int)((long long)val0/(long long)val1));
      int alu10 = (alu9-1);
      int alu11 = (alu8?alu10:alu9);
      data0[((gidx0*4)+gidx1)] = alu11;
    }
  }
}

#include <math.h>
/* kernel */
void E_4_4(int* restrict data0, const int* restrict data1, const int* restrict data2) {
  for (int gidx0 = 0; gidx0 < 4; gidx0++) {
    for (int gidx1 = 0; gidx1 < 4; gidx1++) {
      int val0 = data1[((gidx0*4)+gidx1)];
      int val1 = data2[gidx1];
      int alu0 = ((val1)==0?0:(int)((long long)val0%(long long)val1));
      unsigned char alu1 = (alu0<0);
      unsigned char alu2 = (0<alu0);
      unsigned char alu3 = (alu1||alu2);
      unsigned char alu4 = (val1<0);
      unsigned char alu5 = (alu1<alu4);
      unsigned char alu6 = (alu4<alu1);
      unsigned char alu7 = (alu5||alu6);
      unsigned char alu8 = (alu3&&alu7);
      int alu9 = (alu0+val1);
      int alu10 = (alu8?alu9:alu0);
      data0[((gidx0*4)+gidx1)] = alu10;
    }
  }
}
