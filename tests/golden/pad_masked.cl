
/* kernel */
__kernel void E_6_6(__global float* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float val0 = (((0<gidx1)&&(gidx1<5)&&(1<gidx0))?data1[((gidx1*4)+gidx0+-6)]:0x0p+0f);
  float alu0 = (val0*0x1.8p+1f);
  data0[((gidx1*6)+gidx0)] = alu0;
}
