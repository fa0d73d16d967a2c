/* netCDF-C parallel I/O (NetCDF-4 on parallel HDF5): the library calls of ncfiles.c,
 * with contiguous variables and collective access set per variable. */
#include <string.h>

#include <netcdf.h>
#include <netcdf_par.h>

#include "ncfiles.h"

static int create(MPI_Comm comm, const char *path, int *ncid)
{
    int old_fill, status = nc_create_par(path, NC_CLOBBER | NC_NETCDF4 | NC_MPIIO, comm,
                                         MPI_INFO_NULL, ncid);
    return status != NC_NOERR ? status : nc_set_fill(*ncid, NC_NOFILL, &old_fill);
}

static int open_read(MPI_Comm comm, const char *path, int *ncid)
{
    return nc_open_par(path, NC_NOWRITE, comm, MPI_INFO_NULL, ncid);
}

static int def_var(int ncid, const char *name, int is_double, int ndims, const int *dimids,
                   int *varid)
{
    return nc_def_var(ncid, name, is_double ? NC_DOUBLE : NC_FLOAT, ndims, dimids, varid);
}

/* contiguous: one extent per variable, no chunk index to maintain */
static int def_field(int ncid, int varid)
{
    int status = nc_def_var_chunking(ncid, varid, NC_CONTIGUOUS, NULL);
    return status != NC_NOERR ? status : nc_def_var_fill(ncid, varid, NC_NOFILL, NULL);
}

static int put_text(int ncid, int varid, const char *name, const char *text)
{
    return nc_put_att_text(ncid, varid, name, strlen(text), text);
}

static int collective(int ncid, int varid)
{
    return nc_var_par_access(ncid, varid, NC_COLLECTIVE);
}

static int independent(int ncid, int varid)
{
    return nc_var_par_access(ncid, varid, NC_INDEPENDENT);
}

static int vara(int ncid, int varid, int ndims, const size_t *start, const size_t *count,
                void *buf, nob_nc_transfer what)
{
    (void)ndims;
    if (what == NOB_PUT_DOUBLE)
        return nc_put_vara_double(ncid, varid, start, count, buf);
    if (what == NOB_PUT_FLOAT)
        return nc_put_vara_float(ncid, varid, start, count, buf);
    return nc_get_vara_float(ncid, varid, start, count, buf);
}

static int dim_len(int ncid, const char *name, size_t *len)
{
    int dimid, status = nc_inq_dimid(ncid, name, &dimid);
    return status != NC_NOERR ? status : nc_inq_dimlen(ncid, dimid, len);
}

/* in the order of nob_nc_library's members */
static const nob_nc_library netcdf = {
    nc_strerror, create, open_read, nc_def_dim, def_var, def_field, put_text,
    nc_enddef, collective, vara, dim_len, nc_inq_varid, nc_close, nc_sync, independent,
};

const nob_backend nob_backend_netcdf = {
    "netcdf", nob_nc_create, nob_nc_write, nob_nc_sync, nob_nc_close, nob_nc_open_read, nob_nc_read,
    &netcdf,
};
