__kernel void r_24(__global float* restrict data0, __global const float* restrict data1) {
  float acc0 = 0x0p+0f;
  for (int ridx0 = 0; ridx0 < 24; ridx0++) {
    float val0 = data1[ridx0];
    float alu0 = (acc0+val0);
    acc0 = alu0;
  }
  data0[0] = acc0;
}
