/* PnetCDF (CDF-5) version of the same files: the library calls of ncfiles.c, every data
 * call collective (*_all). Kept in its own file because pnetcdf.h and netcdf.h define the
 * same NC_* macros. */
#include <string.h>

#include <pnetcdf.h>

#include "ncfiles.h"

static int create(MPI_Comm comm, const char *path, int *ncid)
{
    int old_fill, status = ncmpi_create(comm, path, NC_CLOBBER | NC_64BIT_DATA, MPI_INFO_NULL,
                                        ncid);
    return status != NC_NOERR ? status : ncmpi_set_fill(*ncid, NC_NOFILL, &old_fill);
}

static int open_read(MPI_Comm comm, const char *path, int *ncid)
{
    return ncmpi_open(comm, path, NC_NOWRITE, MPI_INFO_NULL, ncid);
}

static int def_dim(int ncid, const char *name, size_t len, int *dimid)
{
    return ncmpi_def_dim(ncid, name, (MPI_Offset)len, dimid);
}

static int def_var(int ncid, const char *name, int is_double, int ndims, const int *dimids,
                   int *varid)
{
    return ncmpi_def_var(ncid, name, is_double ? NC_DOUBLE : NC_FLOAT, ndims, dimids, varid);
}

static int put_text(int ncid, int varid, const char *name, const char *text)
{
    return ncmpi_put_att_text(ncid, varid, name, (MPI_Offset)strlen(text), text);
}

static int vara(int ncid, int varid, int ndims, const size_t *start, const size_t *count,
                void *buf, nob_nc_transfer what)
{
    MPI_Offset s[4], c[4];
    for (int i = 0; i < ndims; i++) {
        s[i] = (MPI_Offset)start[i];
        c[i] = (MPI_Offset)count[i];
    }
    if (what == NOB_PUT_DOUBLE)
        return ncmpi_put_vara_double_all(ncid, varid, s, c, buf);
    if (what == NOB_PUT_FLOAT)
        return ncmpi_put_vara_float_all(ncid, varid, s, c, buf);
    return ncmpi_get_vara_float_all(ncid, varid, s, c, buf);
}

static int dim_len(int ncid, const char *name, size_t *len)
{
    MPI_Offset n;
    int dimid, status = ncmpi_inq_dimid(ncid, name, &dimid);
    if (status == NC_NOERR)
        status = ncmpi_inq_dimlen(ncid, dimid, &n);
    *len = status == NC_NOERR ? (size_t)n : 0;
    return status;
}

/* in the order of nob_nc_library's members */
static const nob_nc_library pnetcdf = {
    ncmpi_strerror, create, open_read, def_dim, def_var, /* def_field */ NULL, put_text,
    ncmpi_enddef, /* collective */ NULL, vara, dim_len, ncmpi_inq_varid, ncmpi_close,
    ncmpi_sync, /* independent */ NULL,
};

const nob_backend nob_backend_pnetcdf = {
    "pnetcdf", nob_nc_create, nob_nc_write, nob_nc_sync, nob_nc_close, nob_nc_open_read,
    nob_nc_read,
    &pnetcdf,
};
