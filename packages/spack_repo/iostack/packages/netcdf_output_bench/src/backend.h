/* One interface over the three ways of storing the output: the model's
 * original gather-and-write binary files, netCDF-C (NetCDF-4/HDF5 parallel)
 * and PnetCDF (CDF-5). Every call is collective over the communicator. */
#ifndef NOB_BACKEND_H
#define NOB_BACKEND_H

#include <mpi.h>

#include "workload.h"

/* When the benchmark itself makes written data durable: never (what the library does
 * anyway, e.g. netCDF-4's syncs at enddef and close), after every output step that wrote
 * to a file, or once per file before closing it. */
typedef enum { NOB_SYNC_NONE, NOB_SYNC_STEP, NOB_SYNC_CLOSE } nob_sync_mode;

typedef struct {
    nob_sync_mode sync;
    int independent;         /* NetCDF field writes independent, not collective */
} nob_io_options;

typedef struct {
    const char *name;
    /* Create every file of the run and define all metadata up front. */
    void *(*create)(const void *lib, const nob_layout *l, const char *dir, int file_per_field,
                    const nob_io_options *io, MPI_Comm comm);
    /* Write nrec consecutive records of one field from a local block. */
    void (*write)(void *h, int type, int field, int rec0, int nrec, const float *block);
    /* Make the files of one output type durable: fsync, nc_sync, ncmpi_sync. */
    void (*sync)(void *h, int type);
    void (*close)(void *h);
    void *(*open_read)(const void *lib, const nob_layout *l, const char *dir,
                       int file_per_field, MPI_Comm comm);
    void (*read)(void *h, int type, int field, int rec0, int nrec, float *block);
    /* what create and open_read get as `lib`: the NetCDF backends' library calls */
    const void *lib;
} nob_backend;

extern const nob_backend nob_backend_posix;
extern const nob_backend nob_backend_netcdf;
extern const nob_backend nob_backend_pnetcdf;

/* dir/<type>.<ext> or, one file per field, dir/<type>_field_NN.<ext> */
void nob_file_path(char *out, size_t outlen, const char *dir, const nob_output_type *t,
                   int field, int file_per_field, const char *ext);
void nob_var_name(char *out, size_t outlen, int field);
const char *nob_lev_dim_name(const nob_output_type *t);

/* Fatal I/O error: report and abort the whole job. */
void nob_fail(MPI_Comm comm, const char *what, const char *detail);

#endif
