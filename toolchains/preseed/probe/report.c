/* Prints "NAME configured=<value from configure> runtime=<value here>" for
 * every probe result that can be recomputed at run time. */
#define _GNU_SOURCE
#include <dirent.h>
#include <float.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include "probe_config.h"

static int ctor_argc = -1;
static int ctor_argv_ok = 0;

__attribute__((constructor))
static void probe_ctor(int argc, char** argv, char** envp)
{
    (void)envp;
    ctor_argc = argc;
    ctor_argv_ok = (argv != NULL && argv[0] != NULL);
}

static void show(const char* name, long configured, long runtime)
{
    printf("%s configured=%ld runtime=%ld\n", name, configured, runtime);
}

static int ieee_order(int little)
{
    const unsigned char d_be[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
    unsigned char d[8];
    double x = 1.0;
    int i;
    memcpy(d, &x, 8);
    for (i = 0; i < 8; i++)
        if (d[i] != d_be[little ? 7 - i : i]) return 0;
    return 1;
}

int main(int argc, char** argv)
{
    const unsigned int one = 1;
    const int little = *(const unsigned char*)&one == 1;
    DIR* proc = opendir("/proc/self");
    (void)argv;

#define SIZE(var, type) show(#var, CFG_##var, (long)sizeof(type))
    SIZE(CMAKE_SIZEOF_VOID_P, void*);
    SIZE(EC_SIZEOF_PTR, void*);
#ifdef CFG_EC_SIZEOF_OFF_T
    SIZE(EC_SIZEOF_OFF_T, off_t);
#endif
    SIZE(SIZEOF_OFF_T, off_t);
    SIZE(ECCODES_SIZEOF_INT, int);
    SIZE(ECCODES_SIZEOF_LONG, long);
    SIZE(ECCODES_SIZEOF_SIZE_T, size_t);
    SIZE(ECKIT_SIZEOF_TIME_T, time_t);
    SIZE(EC_SIZEOF_CHAR, char);
    SIZE(EC_SIZEOF_SHORT, short);
    SIZE(EC_SIZEOF_INT, int);
    SIZE(EC_SIZEOF_LONG, long);
    SIZE(EC_SIZEOF_LONG_LONG, long long);
    SIZE(EC_SIZEOF_FLOAT, float);
    SIZE(EC_SIZEOF_DOUBLE, double);
    SIZE(EC_SIZEOF_LONG_DOUBLE, long double);
    SIZE(EC_SIZEOF_SIZE_T, size_t);
    SIZE(EC_SIZEOF_SSIZE_T, ssize_t);
#undef SIZE
    show("EC_BIG_ENDIAN", CFG_EC_BIG_ENDIAN, !little);
    show("EC_LITTLE_ENDIAN", CFG_EC_LITTLE_ENDIAN, little);
    show("IEEE_BE", CFG_IEEE_BE, ieee_order(0));
    show("IEEE_LE", CFG_IEEE_LE, ieee_order(1));
    show("EC_HAVE_PROCFS", CFG_EC_HAVE_PROCFS, proc != NULL);
    show("EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV", CFG_EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV,
         ctor_argc == argc && ctor_argv_ok);
    show("IOSTACK_LDBL_MANT_DIG", CFG_IOSTACK_LDBL_MANT_DIG, LDBL_MANT_DIG);
    if (proc) closedir(proc);
    return 0;
}
