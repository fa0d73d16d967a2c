/* The injection shims' busy loop (archive_slowdown.c, openifs_slowdown.c): 2 instructions
 * an iteration (dec, jnz), so a shim adds exactly the instructions it is asked for, and
 * callgrind names them iostack_injected_busy_loop. Included once per shim. */
#include <stdlib.h>

__attribute__((noinline)) void iostack_injected_busy_loop(unsigned long iterations) {
    if (iterations)
        __asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(iterations) : : "cc");
}

/* The loop's iterations for the instructions `variable` asks for (0 if it is unset). */
static long injected_iterations(const char *variable) {
    const char *s = getenv(variable);
    return s ? strtol(s, NULL, 10) / 2 : 0;
}
