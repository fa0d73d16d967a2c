/* A real CPU-side regression in OpenIFS's time step, for the work-count gate's injection
 * tests: LD_PRELOAD'ed into ifsMASTER, it runs a busy loop of IOSTACK_INJECT_INSTRUCTIONS
 * instructions (0 if unset) before every SCAN2M, the grid-point computations STEPO calls
 * once a step (libarpifs calls it through the PLT, so this definition wins; STEPO itself,
 * the counted region, cannot be shimmed: callgrind's toggle would turn off inside it). The
 * loop is 2 instructions an iteration (dec, jnz), as archive_slowdown.c's. SCAN2M takes 13
 * arguments and the hidden length of its one character argument: 16 are passed on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

typedef void *p;
typedef void (*scan_fn)(p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p);

#include "busy_loop.h"

void scan2m_(p a0, p a1, p a2, p a3, p a4, p a5, p a6, p a7, p a8, p a9, p a10, p a11,
             p a12, p a13, p a14, p a15) {
    static scan_fn real;
    static long iterations = -1;
    if (!real)
        real = (scan_fn)dlsym(RTLD_NEXT, "scan2m_");
    if (iterations < 0)
        iterations = injected_iterations("IOSTACK_INJECT_INSTRUCTIONS");
    iostack_injected_busy_loop((unsigned long)iterations);
    real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
}
