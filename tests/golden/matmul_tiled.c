#include <math.h>

typedef float sg_float16 __attribute__((vector_size(64)));
typedef int sg_mask_float16 __attribute__((vector_size(64)));

static inline sg_float16 sg_float16_load(const float* p) { sg_float16 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
static inline void sg_float16_store(float* p, sg_float16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
static inline sg_float16 sg_float16_max(sg_float16 a, sg_float16 b) { sg_mask_float16 m = (a != a) | (a > b); return (sg_float16)(((sg_mask_float16)a & m) | ((sg_mask_float16)b & ~m)); }

typedef void (*sg_body_fn)(void*, int, int);
typedef void (*sg_parallel_fn)(sg_body_fn, void*, int);
sg_parallel_fn sg_parallel_for = 0; /* set by the runtime after loading; unset: one thread */
/* kernel */
struct r_32_32_32_args { float* data0; const float* data1; const float* data2; };
static void r_32_32_32_body(void* sg_ctx, int sg_start, int sg_end) {
  struct r_32_32_32_args* sg_args = (struct r_32_32_32_args*)sg_ctx;
  float* restrict data0 = sg_args->data0;
  const float* restrict data1 = sg_args->data1;
  const float* restrict data2 = sg_args->data2;
  for (int gidx0 = sg_start; gidx0 < sg_end; gidx0++) {
    sg_float16 acc0 = ((sg_float16){}+(0x0p+0f));
    sg_float16 acc1 = ((sg_float16){}+(0x0p+0f));
    sg_float16 acc2 = ((sg_float16){}+(0x0p+0f));
    sg_float16 acc3 = ((sg_float16){}+(0x0p+0f));
    sg_float16 acc4 = ((sg_float16){}+(0x0p+0f));
    sg_float16 acc5 = ((sg_float16){}+(0x0p+0f));
    sg_float16 acc6 = ((sg_float16){}+(0x0p+0f));
    sg_float16 acc7 = ((sg_float16){}+(0x0p+0f));
    for (int ridx0 = 0; ridx0 < 8; ridx0++) {
      float val0 = data1[((gidx0*128)+(ridx0*4))];
      sg_float16 val1 = sg_float16_load(data2+(ridx0*128));
      sg_float16 alu0 = (((sg_float16){}+(val0))*val1);
      sg_float16 alu1 = (acc0+alu0);
      acc0 = alu1;
      float val2 = data1[((gidx0*128)+(ridx0*4)+1)];
      sg_float16 val3 = sg_float16_load(data2+((ridx0*128)+32));
      sg_float16 alu2 = (((sg_float16){}+(val2))*val3);
      sg_float16 alu3 = (acc0+alu2);
      acc0 = alu3;
      float val4 = data1[((gidx0*128)+(ridx0*4)+2)];
      sg_float16 val5 = sg_float16_load(data2+((ridx0*128)+64));
      sg_float16 alu4 = (((sg_float16){}+(val4))*val5);
      sg_float16 alu5 = (acc0+alu4);
      acc0 = alu5;
      float val6 = data1[((gidx0*128)+(ridx0*4)+3)];
      sg_float16 val7 = sg_float16_load(data2+((ridx0*128)+96));
      sg_float16 alu6 = (((sg_float16){}+(val6))*val7);
      sg_float16 alu7 = (acc0+alu6);
      acc0 = alu7;
      sg_float16 val8 = sg_float16_load(data2+((ridx0*128)+16));
      sg_float16 alu8 = (((sg_float16){}+(val0))*val8);
      sg_float16 alu9 = (acc1+alu8);
      acc1 = alu9;
      sg_float16 val9 = sg_float16_load(data2+((ridx0*128)+48));
      sg_float16 alu10 = (((sg_float16){}+(val2))*val9);
      sg_float16 alu11 = (acc1+alu10);
      acc1 = alu11;
      sg_float16 val10 = sg_float16_load(data2+((ridx0*128)+80));
      sg_float16 alu12 = (((sg_float16){}+(val4))*val10);
      sg_float16 alu13 = (acc1+alu12);
      acc1 = alu13;
      sg_float16 val11 = sg_float16_load(data2+((ridx0*128)+112));
      sg_float16 alu14 = (((sg_float16){}+(val6))*val11);
      sg_float16 alu15 = (acc1+alu14);
      acc1 = alu15;
      float val12 = data1[((gidx0*128)+(ridx0*4)+32)];
      sg_float16 alu16 = (((sg_float16){}+(val12))*val1);
      sg_float16 alu17 = (acc2+alu16);
      acc2 = alu17;
      float val13 = data1[((gidx0*128)+(ridx0*4)+33)];
      sg_float16 alu18 = (((sg_float16){}+(val13))*val3);
      sg_float16 alu19 = (acc2+alu18);
      acc2 = alu19;
      float val14 = data1[((gidx0*128)+(ridx0*4)+34)];
      sg_float16 alu20 = (((sg_float16){}+(val14))*val5);
      sg_float16 alu21 = (acc2+alu20);
      acc2 = alu21;
      float val15 = data1[((gidx0*128)+(ridx0*4)+35)];
      sg_float16 alu22 = (((sg_float16){}+(val15))*val7);
      sg_float16 alu23 = (acc2+alu22);
      acc2 = alu23;
      sg_float16 alu24 = (((sg_float16){}+(val12))*val8);
      sg_float16 alu25 = (acc3+alu24);
      acc3 = alu25;
      sg_float16 alu26 = (((sg_float16){}+(val13))*val9);
      sg_float16 alu27 = (acc3+alu26);
      acc3 = alu27;
      sg_float16 alu28 = (((sg_float16){}+(val14))*val10);
      sg_float16 alu29 = (acc3+alu28);
      acc3 = alu29;
      sg_float16 alu30 = (((sg_float16){}+(val15))*val11);
      sg_float16 alu31 = (acc3+alu30);
      acc3 = alu31;
      float val16 = data1[((gidx0*128)+(ridx0*4)+64)];
      sg_float16 alu32 = (((sg_float16){}+(val16))*val1);
      sg_float16 alu33 = (acc4+alu32);
      acc4 = alu33;
      float val17 = data1[((gidx0*128)+(ridx0*4)+65)];
      sg_float16 alu34 = (((sg_float16){}+(val17))*val3);
      sg_float16 alu35 = (acc4+alu34);
      acc4 = alu35;
      float val18 = data1[((gidx0*128)+(ridx0*4)+66)];
      sg_float16 alu36 = (((sg_float16){}+(val18))*val5);
      sg_float16 alu37 = (acc4+alu36);
      acc4 = alu37;
      float val19 = data1[((gidx0*128)+(ridx0*4)+67)];
      sg_float16 alu38 = (((sg_float16){}+(val19))*val7);
      sg_float16 alu39 = (acc4+alu38);
      acc4 = alu39;
      sg_float16 alu40 = (((sg_float16){}+(val16))*val8);
      sg_float16 alu41 = (acc5+alu40);
      acc5 = alu41;
      sg_float16 alu42 = (((sg_float16){}+(val17))*val9);
      sg_float16 alu43 = (acc5+alu42);
      acc5 = alu43;
      sg_float16 alu44 = (((sg_float16){}+(val18))*val10);
      sg_float16 alu45 = (acc5+alu44);
      acc5 = alu45;
      sg_float16 alu46 = (((sg_float16){}+(val19))*val11);
      sg_float16 alu47 = (acc5+alu46);
      acc5 = alu47;
      float val20 = data1[((gidx0*128)+(ridx0*4)+96)];
      sg_float16 alu48 = (((sg_float16){}+(val20))*val1);
      sg_float16 alu49 = (acc6+alu48);
      acc6 = alu49;
      float val21 = data1[((gidx0*128)+(ridx0*4)+97)];
      sg_float16 alu50 = (((sg_float16){}+(val21))*val3);
      sg_float16 alu51 = (acc6+alu50);
      acc6 = alu51;
      float val22 = data1[((gidx0*128)+(ridx0*4)+98)];
      sg_float16 alu52 = (((sg_float16){}+(val22))*val5);
      sg_float16 alu53 = (acc6+alu52);
      acc6 = alu53;
      float val23 = data1[((gidx0*128)+(ridx0*4)+99)];
      sg_float16 alu54 = (((sg_float16){}+(val23))*val7);
      sg_float16 alu55 = (acc6+alu54);
      acc6 = alu55;
      sg_float16 alu56 = (((sg_float16){}+(val20))*val8);
      sg_float16 alu57 = (acc7+alu56);
      acc7 = alu57;
      sg_float16 alu58 = (((sg_float16){}+(val21))*val9);
      sg_float16 alu59 = (acc7+alu58);
      acc7 = alu59;
      sg_float16 alu60 = (((sg_float16){}+(val22))*val10);
      sg_float16 alu61 = (acc7+alu60);
      acc7 = alu61;
      sg_float16 alu62 = (((sg_float16){}+(val23))*val11);
      sg_float16 alu63 = (acc7+alu62);
      acc7 = alu63;
    }
    sg_float16_store(data0+(gidx0*128), acc0);
    sg_float16_store(data0+((gidx0*128)+16), acc1);
    sg_float16_store(data0+((gidx0*128)+32), acc2);
    sg_float16_store(data0+((gidx0*128)+48), acc3);
    sg_float16_store(data0+((gidx0*128)+64), acc4);
    sg_float16_store(data0+((gidx0*128)+80), acc5);
    sg_float16_store(data0+((gidx0*128)+96), acc6);
    sg_float16_store(data0+((gidx0*128)+112), acc7);
  }
}
void r_32_32_32(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  struct r_32_32_32_args sg_args = { data0, data1, data2 };
  if (sg_parallel_for) sg_parallel_for(r_32_32_32_body, &sg_args, 8);
  else r_32_32_32_body(&sg_args, 0, 8);
}
