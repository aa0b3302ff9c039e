
/* kernel */
__kernel void r_4_6(__global float* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  float acc0 = 0x0p+0f;
  float val0 = data1[(gidx0*6)];
  float alu0 = (acc0+val0);
  acc0 = alu0;
  float val1 = data1[((gidx0*6)+1)];
  float alu1 = (acc0+val1);
  acc0 = alu1;
  float val2 = data1[((gidx0*6)+2)];
  float alu2 = (acc0+val2);
  acc0 = alu2;
  float val3 = data1[((gidx0*6)+3)];
  float alu3 = (acc0+val3);
  acc0 = alu3;
  float val4 = data1[((gidx0*6)+4)];
  float alu4 = (acc0+val4);
  acc0 = alu4;
  float val5 = data1[((gidx0*6)+5)];
  float alu5 = (acc0+val5);
  acc0 = alu5;
  data0[gidx0] = acc0;
}
