/* "serial": the model's original output path. Every field is gathered to
 * rank 0, which writes it to its own headerless direct-access file: record
 * r of a field with nlev levels sits at byte r * nlev*nlat*nlon*4. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"

typedef struct {
    const nob_layout *l;
    MPI_Comm comm;
    int fd[NOB_NTYPES][128];
    int writing;
    float *gathered, *ordered;
    size_t gathered_cap;
    int *counts, *displs;
} posix_files;

static void pwrite_all(posix_files *h, int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            nob_fail(h->comm, "pwrite", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
        off += n;
    }
}

static void pread_all(posix_files *h, int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            nob_fail(h->comm, "pread", n == 0 ? "file shorter than the run's records"
                                              : strerror(errno));
        p += n;
        len -= (size_t)n;
        off += n;
    }
}

static posix_files *posix_open(const nob_layout *l, const char *dir, MPI_Comm comm, int writing)
{
    posix_files *h = calloc(1, sizeof *h);
    h->l = l;
    h->comm = comm;
    h->writing = writing;
    /* writing: only rank 0 touches the files, as in the model; reading: every
     * rank reads its own rows straight from them */
    int opens = writing ? l->rank == 0 : 1;
    for (int t = 0; t < NOB_NTYPES; t++)
        for (int f = 0; f < nob_types[t].nfields; f++) {
            h->fd[t][f] = -1;
            if (!opens)
                continue;
            char path[4096];
            nob_file_path(path, sizeof path, dir, &nob_types[t], f, 1, "bin");
            h->fd[t][f] = writing ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)
                                  : open(path, O_RDONLY);
            if (h->fd[t][f] < 0)
                nob_fail(comm, path, strerror(errno));
        }
    if (writing) {
        h->counts = malloc(sizeof(int) * l->nranks);
        h->displs = malloc(sizeof(int) * l->nranks);
    }
    return h;
}

static void *posix_create(const void *lib, const nob_layout *l, const char *dir,
                          int file_per_field, const nob_io_options *io, MPI_Comm comm)
{
    (void)lib;
    (void)file_per_field;
    (void)io;
    return posix_open(l, dir, comm, 1);
}

static void *posix_open_read(const void *lib, const nob_layout *l, const char *dir,
                             int file_per_field, MPI_Comm comm)
{
    (void)lib;
    (void)file_per_field;
    return posix_open(l, dir, comm, 0);
}

static void posix_write(void *vh, int type, int field, int rec0, int nrec, const float *block)
{
    posix_files *h = vh;
    const nob_layout *l = h->l;
    const nob_output_type *t = &nob_types[type];
    int nlev = nob_nlev(l->model, t), nlat = l->model->nlat, nlon = l->model->nlon;
    size_t global = (size_t)nrec * nlev * nlat * nlon;

    if (l->rank == 0) {
        if (global > h->gathered_cap) {
            h->gathered = realloc(h->gathered, global * sizeof(float));
            h->ordered = realloc(h->ordered, global * sizeof(float));
            h->gathered_cap = global;
        }
        for (int r = 0, off = 0; r < l->nranks; r++) {
            int lat0, rows;
            nob_block_rows(nlat, l->nranks, r, &lat0, &rows);
            h->counts[r] = nrec * nlev * rows * nlon;
            h->displs[r] = off;
            off += h->counts[r];
        }
    }
    int mine = (int)nob_block_values(l, t, nrec);
    MPI_Gatherv(block, mine, MPI_FLOAT, h->gathered, h->counts, h->displs, MPI_FLOAT, 0,
                h->comm);
    if (l->rank != 0)
        return;

    /* rank-major gather buffer -> [rec][lev][lat][lon] */
    for (int r = 0; r < l->nranks; r++) {
        int lat0, rows;
        nob_block_rows(nlat, l->nranks, r, &lat0, &rows);
        const float *src = h->gathered + h->displs[r];
        for (int q = 0; q < nrec; q++)
            for (int k = 0; k < nlev; k++) {
                size_t dst = (((size_t)q * nlev + k) * nlat + lat0) * nlon;
                memcpy(h->ordered + dst, src, sizeof(float) * rows * nlon);
                src += (size_t)rows * nlon;
            }
    }
    size_t record_bytes = sizeof(float) * nlev * nlat * nlon;
    pwrite_all(h, h->fd[type][field], h->ordered, global * sizeof(float),
               (off_t)rec0 * (off_t)record_bytes);
}

static void posix_read(void *vh, int type, int field, int rec0, int nrec, float *block)
{
    posix_files *h = vh;
    const nob_layout *l = h->l;
    const nob_output_type *t = &nob_types[type];
    int nlev = nob_nlev(l->model, t), nlat = l->model->nlat, nlon = l->model->nlon;
    size_t row_run = (size_t)l->nrows * nlon;
    for (int q = 0; q < nrec; q++)
        for (int k = 0; k < nlev; k++) {
            off_t off = (off_t)(((size_t)(rec0 + q) * nlev + k) * nlat + l->lat0) * nlon
                        * (off_t)sizeof(float);
            if (row_run)
                pread_all(h, h->fd[type][field], block, row_run * sizeof(float), off);
            block += row_run;
        }
}

/* the files are rank 0's alone */
static void posix_sync(void *vh, int type)
{
    posix_files *h = vh;
    for (int f = 0; f < nob_types[type].nfields; f++)
        if (h->fd[type][f] >= 0 && fsync(h->fd[type][f]) != 0)
            nob_fail(h->comm, "fsync", strerror(errno));
}

static void posix_close(void *vh)
{
    posix_files *h = vh;
    for (int t = 0; t < NOB_NTYPES; t++)
        for (int f = 0; f < nob_types[t].nfields; f++)
            if (h->fd[t][f] >= 0 && close(h->fd[t][f]) != 0)
                nob_fail(h->comm, "close", strerror(errno));
    free(h->gathered);
    free(h->ordered);
    free(h->counts);
    free(h->displs);
    free(h);
}

const nob_backend nob_backend_posix = {
    "posix", posix_create, posix_write, posix_sync, posix_close, posix_open_read, posix_read, NULL,
};
