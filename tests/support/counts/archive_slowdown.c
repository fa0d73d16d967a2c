/* A real CPU-side regression in FDB's archive path, for the work-count gate's injection
 * tests: LD_PRELOAD'ed into fdb-archive-bench, it runs a busy loop of
 * IOSTACK_INJECT_INSTRUCTIONS instructions (0 if unset) before every
 * fdb5::FDB::archive(key, data, length), then FDB's own (the bench calls it through the
 * PLT, so this definition wins). The loop is 2 instructions an iteration (dec, jnz), so
 * the instructions added per field are the ones asked for, to the instruction. With
 * IOSTACK_INJECT_SYNC, one more fdatasync after every fdb5::FDB::flush() instead. With
 * IOSTACK_INJECT_RETRIEVE_INSTRUCTIONS, the same loop in FDB's retrieve path: before every
 * eckit::PathName::partHandle(offset, length), which FDB calls through the PLT once for each
 * field it finds (inside fdb5::FDB::retrieve, the fdb-retrieve workload's region; a shim of
 * a toggled function itself would turn the region off, see decode_twice.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>

typedef void (*archive_fn)(void *, const void *, const void *, unsigned long);

#include "busy_loop.h"

/* fdb5::FDB::archive(fdb5::Key const&, void const*, unsigned long) */
void _ZN4fdb53FDB7archiveERKNS_3KeyEPKvm(void *self, const void *key, const void *data,
                                          unsigned long length) {
    static archive_fn real;
    static long iterations = -1;
    if (!real)
        real = (archive_fn)dlsym(RTLD_NEXT, "_ZN4fdb53FDB7archiveERKNS_3KeyEPKvm");
    if (iterations < 0)
        iterations = injected_iterations("IOSTACK_INJECT_INSTRUCTIONS");
    iostack_injected_busy_loop((unsigned long)iterations);
    real(self, key, data, length);
}

/* fdb5::FDB::flush(): with IOSTACK_INJECT_SYNC set, one more fdatasync (of the working
 * directory) after FDB's own flush: a durability change the sync counts must show. */
void _ZN4fdb53FDB5flushEv(void *self) {
    static void (*real)(void *);
    static int sync = -1;
    if (!real)
        real = (void (*)(void *))dlsym(RTLD_NEXT, "_ZN4fdb53FDB5flushEv");
    if (sync < 0)  /* once: the first flush's extra work cancels out per field */
        sync = getenv("IOSTACK_INJECT_SYNC") != NULL;
    real(self);
    if (sync) {
        int fd = open(".", O_RDONLY);
        if (fd >= 0) {
            fdatasync(fd);
            close(fd);
        }
    }
}

typedef void *(*part_handle_fn)(const void *, const void *, const void *);

/* eckit::PathName::partHandle(eckit::Offset const&, eckit::Length const&) const */
void *_ZNK5eckit8PathName10partHandleERKNS_6OffsetERKNS_6LengthE(const void *self,
                                                                 const void *offset,
                                                                 const void *length) {
    static part_handle_fn real;
    static long iterations = -1;
    if (!real)
        real = (part_handle_fn)dlsym(RTLD_NEXT,
                                     "_ZNK5eckit8PathName10partHandleERKNS_6OffsetERKNS_6LengthE");
    if (iterations < 0)
        iterations = injected_iterations("IOSTACK_INJECT_RETRIEVE_INSTRUCTIONS");
    iostack_injected_busy_loop((unsigned long)iterations);
    return real(self, offset, length);
}
