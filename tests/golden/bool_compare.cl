
/* kernel */
__kernel void E_4_4(__global uchar* restrict data0, __global const float* restrict data1, __global const float* restrict data2, __global const float* restrict data3) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float val0 = data1[((gidx1*4)+gidx0)];
  uchar alu0 = (val0<0x1.4p+2f);
  float val1 = data2[gidx0];
  float val2 = data3[((gidx1*4)+gidx0)];
  uchar alu1 = (val1<val2);
  uchar alu2 = (alu0<alu1);
  uchar alu3 = (alu1<alu0);
  uchar alu4 = (alu2||alu3);
  data0[((gidx1*4)+gidx0)] = alu4;
}
