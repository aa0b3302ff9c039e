__kernel void r_4_6(__global float* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  float acc0 = (-INFINITY);
  for (int ridx0 = 0; ridx0 < 6; ridx0++) {
    float val0 = data1[((gidx0*6)+ridx0)];
    float alu0 = (((acc0)!=(acc0)||(acc0)>(val0))?(acc0):(val0));
    acc0 = alu0;
  }
  data0[gidx0] = acc0;
}

__kernel void r_4_6(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2) {
  int gidx0 = (int)get_global_id(0);
  float acc0 = 0x0p+0f;
  for (int ridx0 = 0; ridx0 < 6; ridx0++) {
    float val0 = data1[((gidx0*6)+ridx0)];
    float val1 = data2[gidx0];
    float alu0 = (val0-val1);
    float alu1 = (alu0*0x1.715476p+0f);
    float alu2 = exp2(alu1);
    float alu3 = (acc0+alu2);
    acc0 = alu3;
  }
  data0[gidx0] = acc0;
}

__kernel void E_4_6(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2, __global const float* restrict data3) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float val0 = data1[((gidx1*6)+gidx0)];
  float val1 = data2[gidx1];
  float alu0 = (val0-val1);
  float alu1 = (alu0*0x1.715476p+0f);
  float alu2 = exp2(alu1);
  float val2 = data3[gidx1];
  float alu3 = (alu2/val2);
  data0[((gidx1*6)+gidx0)] = alu3;
}
