
/* kernel */
__kernel void r_24(__global float* restrict data0, __global const float* restrict data1) {
  float4 acc0 = ((float4)(0x0p+0f));
  float4 val0 = vload4(0, data1+0);
  float4 alu0 = (acc0+val0);
  acc0 = alu0;
  float4 val1 = vload4(0, data1+4);
  float4 alu1 = (acc0+val1);
  acc0 = alu1;
  float4 val2 = vload4(0, data1+8);
  float4 alu2 = (acc0+val2);
  acc0 = alu2;
  float4 val3 = vload4(0, data1+12);
  float4 alu3 = (acc0+val3);
  acc0 = alu3;
  float4 val4 = vload4(0, data1+16);
  float4 alu4 = (acc0+val4);
  acc0 = alu4;
  float4 val5 = vload4(0, data1+20);
  float4 alu5 = (acc0+val5);
  acc0 = alu5;
  float alu6 = (acc0.s0+acc0.s1+acc0.s2+acc0.s3);
  data0[0] = alu6;
}
