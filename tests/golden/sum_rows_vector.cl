
/* kernel */
__kernel void r_4_64(__global float* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  float4 acc0 = ((float4)(0x0p+0f));
  for (int ridx0 = 0; ridx0 < 4; ridx0++) {
    float4 val0 = vload4(0, data1+((gidx0*64)+(ridx0*16)));
    float4 alu0 = (acc0+val0);
    acc0 = alu0;
    float4 val1 = vload4(0, data1+((gidx0*64)+(ridx0*16)+4));
    float4 alu1 = (acc0+val1);
    acc0 = alu1;
    float4 val2 = vload4(0, data1+((gidx0*64)+(ridx0*16)+8));
    float4 alu2 = (acc0+val2);
    acc0 = alu2;
    float4 val3 = vload4(0, data1+((gidx0*64)+(ridx0*16)+12));
    float4 alu3 = (acc0+val3);
    acc0 = alu3;
  }
  float alu4 = (acc0.s0+acc0.s1+acc0.s2+acc0.s3);
  data0[gidx0] = alu4;
}
