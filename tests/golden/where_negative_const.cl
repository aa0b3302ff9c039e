
/* kernel */
__kernel void E_4_4(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2, __global const float* restrict data3) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float val0 = data1[((gidx1*4)+gidx0)];
  float val1 = data2[gidx0];
  uchar alu0 = (val0<val1);
  float val2 = data3[((gidx1*4)+gidx0)];
  float alu1 = (alu0?val2:(-0x1.8p+0f));
  data0[((gidx1*4)+gidx0)] = alu1;
}
