__kernel void r_4_3_8(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float acc0 = 0x0p+0f;
  for (int ridx0 = 0; ridx0 < 8; ridx0++) {
    float val0 = data1[((gidx1*8)+ridx0)];
    float val1 = data2[((ridx0*3)+gidx0)];
    float alu0 = (val0*val1);
    float alu1 = (acc0+alu0);
    acc0 = alu1;
  }
  data0[((gidx1*3)+gidx0)] = acc0;
}
