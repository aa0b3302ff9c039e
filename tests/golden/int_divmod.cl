
/* kernel */
__kernel void E_4_4(__global int* restrict data0, __global const int* restrict data1, __global const int* restrict data2) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  int val0 = data1[((gidx1*4)+gidx0)];
  int val1 = data2[gidx0];
  int alu0 = ((val1)==0?0:(int)((long)val0%(long)val1));
  uchar alu1 = (alu0<0);
  uchar alu2 = (0<alu0);
  uchar alu3 = (alu1||alu2);
  uchar alu4 = (val1<0);
  uchar alu5 = (alu1<alu4);
  uchar alu6 = (alu4<alu1);
  uchar alu7 = (alu5||alu6);
  uchar alu8 = (alu3&&alu7);
  int alu9 = ((val1)==0?0:(int)((long)val0/(long)val1));
  int alu10 = (alu9-1);
  int alu11 = (alu8?alu10:alu9);
  data0[((gidx1*4)+gidx0)] = alu11;
}


/* kernel */
__kernel void E_4_4(__global int* restrict data0, __global const int* restrict data1, __global const int* restrict data2) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  int val0 = data1[((gidx1*4)+gidx0)];
  int val1 = data2[gidx0];
  int alu0 = ((val1)==0?0:(int)((long)val0%(long)val1));
  uchar alu1 = (alu0<0);
  uchar alu2 = (0<alu0);
  uchar alu3 = (alu1||alu2);
  uchar alu4 = (val1<0);
  uchar alu5 = (alu1<alu4);
  uchar alu6 = (alu4<alu1);
  uchar alu7 = (alu5||alu6);
  uchar alu8 = (alu3&&alu7);
  int alu9 = (alu0+val1);
  int alu10 = (alu8?alu9:alu0);
  data0[((gidx1*4)+gidx0)] = alu10;
}
