/* The NetCDF modes' files, whichever library writes them: one file per field or per
 * output type, its dimensions, variables, attributes and coordinates, defined once, and
 * each field's hyperslab of a rank. The library is a table of calls (backend_netcdf.c:
 * netCDF-C on parallel HDF5; backend_pnetcdf.c: PnetCDF); both return NC_NOERR (0) or an
 * error code for strerror. */
#ifndef NOB_NCFILES_H
#define NOB_NCFILES_H

#include <stddef.h>

#include "backend.h"

/* NC_GLOBAL in both libraries: attributes of the file rather than of a variable */
#define NOB_NC_GLOBAL (-1)

typedef enum { NOB_PUT_DOUBLE, NOB_PUT_FLOAT, NOB_GET_FLOAT } nob_nc_transfer;

typedef struct {
    const char *(*strerror)(int status);
    /* create (clobbering, no fill values) or open for reading, collectively over comm */
    int (*create)(MPI_Comm comm, const char *path, int *ncid);
    int (*open)(MPI_Comm comm, const char *path, int *ncid);
    int (*def_dim)(int ncid, const char *name, size_t len, int *dimid);
    int (*def_var)(int ncid, const char *name, int is_double, int ndims, const int *dimids,
                   int *varid);
    /* storage settings of a field variable, or NULL */
    int (*def_field)(int ncid, int varid);
    int (*put_text)(int ncid, int varid, const char *name, const char *text);
    int (*enddef)(int ncid);
    /* per-variable collective access, or NULL where every data call is collective */
    int (*collective)(int ncid, int varid);
    /* a hyperslab of ndims dimensions, collectively */
    int (*vara)(int ncid, int varid, int ndims, const size_t *start, const size_t *count,
                void *buf, nob_nc_transfer what);
    int (*dim_len)(int ncid, const char *name, size_t *len);
    int (*var_id)(int ncid, const char *name, int *varid);
    int (*close)(int ncid);
    /* flush a file to storage, collectively */
    int (*sync)(int ncid);
    /* per-variable independent access, or NULL where the library has none here */
    int (*independent)(int ncid, int varid);
} nob_nc_library;

/* the nob_backend functions of a NetCDF backend; `lib` is its nob_nc_library */
void *nob_nc_create(const void *lib, const nob_layout *l, const char *dir, int file_per_field,
                    const nob_io_options *io, MPI_Comm comm);
void *nob_nc_open_read(const void *lib, const nob_layout *l, const char *dir,
                       int file_per_field, MPI_Comm comm);
void nob_nc_write(void *h, int type, int field, int rec0, int nrec, const float *block);
void nob_nc_read(void *h, int type, int field, int rec0, int nrec, float *block);
void nob_nc_sync(void *h, int type);
void nob_nc_close(void *h);

#endif
