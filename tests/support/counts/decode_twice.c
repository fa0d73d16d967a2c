/* A real CPU-side regression in ecCodes' decoding, for the work-count gate's injection
 * tests (issue 38: "ecCodes decoding each message twice"): LD_PRELOAD'ed into
 * grib_get_data, with IOSTACK_INJECT_DECODE_TWICE set, every message the tool reads
 * (grib_new_from_file, which grib_get_data calls through the PLT, once a message) is
 * decoded a second time: a second handle made from the same message
 * (grib_handle_new_from_message), its values unpacked (grib_get_double_array), the handle
 * deleted. The tool gets the first handle, unchanged. Without the variable it only
 * forwards.
 *
 * Why grib_new_from_file and not the decode functions themselves: the grib-decode
 * workload's timed region is callgrind's --toggle-collect of grib_handle_new_from_message
 * and grib_get_double_array, matched by name, and a toggle nested in another turns
 * collection off: a shim function of either name (libeccodes calls both through its PLT
 * too, so the shim would sit inside the region) moved the count by -10% with no injection
 * at all. Here the second decode calls ecCodes' own two functions from outside the region,
 * so it is counted exactly as the first is.
 *
 * A shim of its own, not a part of archive_slowdown.c: it calls ecCodes, which
 * fdb-archive-bench's workloads never need to find in the shim. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct grib_handle grib_handle;
typedef grib_handle *(*new_from_file_fn)(void *, FILE *, int, int *);

grib_handle *grib_new_from_file(void *context, FILE *f, int headers_only, int *error) {
    static new_from_file_fn real;
    static int twice = -1, inside;
    static int (*get_message)(const grib_handle *, const void **, size_t *);
    static grib_handle *(*new_from_message)(void *, const void *, size_t);
    static int (*get_size)(const grib_handle *, const char *, size_t *);
    static int (*get_double_array)(const grib_handle *, const char *, double *, size_t *);
    static int (*delete_handle)(grib_handle *);
    if (!real) {
        real = (new_from_file_fn)dlsym(RTLD_NEXT, "grib_new_from_file");
        get_message = dlsym(RTLD_NEXT, "grib_get_message");
        new_from_message = dlsym(RTLD_NEXT, "grib_handle_new_from_message");
        get_size = dlsym(RTLD_NEXT, "grib_get_size");
        get_double_array = dlsym(RTLD_NEXT, "grib_get_double_array");
        delete_handle = dlsym(RTLD_NEXT, "grib_handle_delete");
    }
    if (twice < 0)
        twice = getenv("IOSTACK_INJECT_DECODE_TWICE") != NULL;
    grib_handle *h = real(context, f, headers_only, error);
    if (twice && h && !inside && !headers_only) {
        const void *message;
        size_t size, n;
        inside = 1;
        if (get_message(h, &message, &size) == 0) {
            grib_handle *again = new_from_message(context, message, size);
            if (again && get_size(again, "values", &n) == 0) {
                double *values = malloc((n ? n : 1) * sizeof *values);
                if (values)
                    get_double_array(again, "values", values, &n);
                free(values);
            }
            if (again)
                delete_handle(again);
        }
        inside = 0;
    }
    return h;
}
