#include <math.h>

#if defined(__FMA__) || defined(__aarch64__)
#define sg_fmaf(a, b, c) __builtin_fmaf(a, b, c)
#define sg_fma(a, b, c) __builtin_fma(a, b, c)
#else
#define sg_fmaf(a, b, c) ((a) * (b) + (c))
#define sg_fma(a, b, c) ((a) * (b) + (c))
#endif
/* kernel */
void r_4_3_8(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int gidx1 = 0; gidx1 < 3; gidx1++) {
    float acc0 = 0x0p+0f;
    float acc1 = 0x0p+0f;
    float acc2 = 0x0p+0f;
    float acc3 = 0x0p+0f;
    float val0 = data1[0];
    float val1 = data2[gidx1];
    float alu0 = sg_fmaf(val0,val1,acc0);
    acc0 = alu0;
    float val2 = data1[1];
    float val3 = data2[(gidx1+3)];
    float alu1 = sg_fmaf(val2,val3,acc0);
    acc0 = alu1;
    float val4 = data1[2];
    float val5 = data2[(gidx1+6)];
    float alu2 = sg_fmaf(val4,val5,acc0);
    acc0 = alu2;
    float val6 = data1[3];
    float val7 = data2[(gidx1+9)];
    float alu3 = sg_fmaf(val6,val7,acc0);
    acc0 = alu3;
    float val8 = data1[4];
    float val9 = data2[(gidx1+12)];
    float alu4 = sg_fmaf(val8,val9,acc0);
    acc0 = alu4;
    float val10 = data1[5];
    float val11 = data2[(gidx1+15)];
    float alu5 = sg_fmaf(val10,val11,acc0);
    acc0 = alu5;
    float val12 = data1[6];
    float val13 = data2[(gidx1+18)];
    float alu6 = sg_fmaf(val12,val13,acc0);
    acc0 = alu6;
    float val14 = data1[7];
    float val15 = data2[(gidx1+21)];
    float alu7 = sg_fmaf(val14,val15,acc0);
    acc0 = alu7;
    float val16 = data1[8];
    float alu8 = sg_fmaf(val16,val1,acc1);
    acc1 = alu8;
    float val17 = data1[9];
    float alu9 = sg_fmaf(val17,val3,acc1);
    acc1 = alu9;
    float val18 = data1[10];
    float alu10 = sg_fmaf(val18,val5,acc1);
    acc1 = alu10;
    float val19 = data1[11];
    float alu11 = sg_fmaf(val19,val7,acc1);
    acc1 = alu11;
    float val20 = data1[12];
    float alu12 = sg_fmaf(val20,val9,acc1);
    acc1 = alu12;
    float val21 = data1[13];
    float alu13 = sg_fmaf(val21,val11,acc1);
    acc1 = alu13;
    float val22 = data1[14];
    float alu14 = sg_fmaf(val22,val13,acc1);
    acc1 = alu14;
    float val23 = data1[15];
    float alu15 = sg_fmaf(val23,val15,acc1);
    acc1 = alu15;
    float val24 = data1[16];
    float alu16 = sg_fmaf(val24,val1,acc2);
    acc2 = alu16;
    float val25 = data1[17];
    float alu17 = sg_fmaf(val25,val3,acc2);
    acc2 = alu17;
    float val26 = data1[18];
    float alu18 = sg_fmaf(val26,val5,acc2);
    acc2 = alu18;
    float val27 = data1[19];
    float alu19 = sg_fmaf(val27,val7,acc2);
    acc2 = alu19;
    float val28 = data1[20];
    float alu20 = sg_fmaf(val28,val9,acc2);
    acc2 = alu20;
    float val29 = data1[21];
    float alu21 = sg_fmaf(val29,val11,acc2);
    acc2 = alu21;
    float val30 = data1[22];
    float alu22 = sg_fmaf(val30,val13,acc2);
    acc2 = alu22;
    float val31 = data1[23];
    float alu23 = sg_fmaf(val31,val15,acc2);
    acc2 = alu23;
    float val32 = data1[24];
    float alu24 = sg_fmaf(val32,val1,acc3);
    acc3 = alu24;
    float val33 = data1[25];
    float alu25 = sg_fmaf(val33,val3,acc3);
    acc3 = alu25;
    float val34 = data1[26];
    float alu26 = sg_fmaf(val34,val5,acc3);
    acc3 = alu26;
    float val35 = data1[27];
    float alu27 = sg_fmaf(val35,val7,acc3);
    acc3 = alu27;
    float val36 = data1[28];
    float alu28 = sg_fmaf(val36,val9,acc3);
    acc3 = alu28;
    float val37 = data1[29];
    float alu29 = sg_fmaf(val37,val11,acc3);
    acc3 = alu29;
    float val38 = data1[30];
    float alu30 = sg_fmaf(val38,val13,acc3);
    acc3 = alu30;
    float val39 = data1[31];
    float alu31 = sg_fmaf(val39,val15,acc3);
    acc3 = alu31;
    data0[gidx1] = acc0;
    data0[(gidx1+3)] = acc1;
    data0[(gidx1+6)] = acc2;
    data0[(gidx1+9)] = acc3;
  }
}
