/* netCDF-C parallel I/O (NetCDF-4 on parallel HDF5), following the seed's
 * advice: files created and all metadata defined once, collective access
 * per variable, a fixed-length time axis and no fill values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netcdf.h>
#include <netcdf_par.h>

#include "backend.h"

typedef struct {
    const nob_layout *l;
    MPI_Comm comm;
    int file_per_field;
    int ncid[NOB_NTYPES][128];   /* the same ncid for all fields of a combined file */
    int varid[NOB_NTYPES][128];
} nc_files;

#define NC_TRY(h, call)                                                   \
    do {                                                                  \
        int status_ = (call);                                             \
        if (status_ != NC_NOERR)                                          \
            nob_fail((h)->comm, #call, nc_strerror(status_));             \
    } while (0)

static void put_text(nc_files *h, int ncid, int varid, const char *name, const char *text)
{
    NC_TRY(h, nc_put_att_text(ncid, varid, name, strlen(text), text));
}

/* Define one file holding fields [f0, f1) of type t, then write its coordinates. */
static void define_file(nc_files *h, int type, int f0, int f1, const char *path)
{
    const nob_layout *l = h->l;
    const nob_model *m = l->model;
    const nob_output_type *t = &nob_types[type];
    const char *levname = nob_lev_dim_name(t);
    int nlev = nob_nlev(m, t), ntime = nob_total_records(l, t);
    int ncid, old_fill, dim[4], ndims = 0;
    int time_var, lat_var, lon_var, lev_var = -1;

    NC_TRY(h, nc_create_par(path, NC_CLOBBER | NC_NETCDF4 | NC_MPIIO, h->comm, MPI_INFO_NULL,
                            &ncid));
    NC_TRY(h, nc_set_fill(ncid, NC_NOFILL, &old_fill));
    /* fixed time axis: an unlimited one costs a metadata update per write */
    NC_TRY(h, nc_def_dim(ncid, "time", (size_t)ntime, &dim[ndims++]));
    if (levname)
        NC_TRY(h, nc_def_dim(ncid, levname, (size_t)nlev, &dim[ndims++]));
    NC_TRY(h, nc_def_dim(ncid, "lat", (size_t)m->nlat, &dim[ndims++]));
    NC_TRY(h, nc_def_dim(ncid, "lon", (size_t)m->nlon, &dim[ndims++]));

    NC_TRY(h, nc_def_var(ncid, "time", NC_DOUBLE, 1, &dim[0], &time_var));
    put_text(h, ncid, time_var, "units", "hours since 2000-01-01 00:00:00");
    if (levname) {
        NC_TRY(h, nc_def_var(ncid, levname, NC_FLOAT, 1, &dim[1], &lev_var));
        put_text(h, ncid, lev_var, "long_name", t->levkind == NOB_LEV_PRESSURE
                                                    ? "pressure level index"
                                                    : "soil level index");
    }
    NC_TRY(h, nc_def_var(ncid, "lat", NC_FLOAT, 1, &dim[ndims - 2], &lat_var));
    put_text(h, ncid, lat_var, "units", "degrees_north");
    NC_TRY(h, nc_def_var(ncid, "lon", NC_FLOAT, 1, &dim[ndims - 1], &lon_var));
    put_text(h, ncid, lon_var, "units", "degrees_east");

    for (int f = f0; f < f1; f++) {
        char name[32];
        nob_var_name(name, sizeof name, f);
        NC_TRY(h, nc_def_var(ncid, name, NC_FLOAT, ndims, dim, &h->varid[type][f]));
        /* contiguous: one extent per variable, no chunk index to maintain */
        NC_TRY(h, nc_def_var_chunking(ncid, h->varid[type][f], NC_CONTIGUOUS, NULL));
        NC_TRY(h, nc_def_var_fill(ncid, h->varid[type][f], NC_NOFILL, NULL));
        put_text(h, ncid, h->varid[type][f], "output_type", t->name);
        h->ncid[type][f] = ncid;
    }
    put_text(h, ncid, NC_GLOBAL, "source", "netcdf-output-bench");
    put_text(h, ncid, NC_GLOBAL, "model", m->name);
    put_text(h, ncid, NC_GLOBAL, "output_type", t->name);
    NC_TRY(h, nc_enddef(ncid));

    int vars[] = {time_var, lat_var, lon_var, lev_var};
    for (size_t v = 0; v < 4; v++)
        if (vars[v] >= 0)
            NC_TRY(h, nc_var_par_access(ncid, vars[v], NC_COLLECTIVE));
    for (int f = f0; f < f1; f++)
        NC_TRY(h, nc_var_par_access(ncid, h->varid[type][f], NC_COLLECTIVE));

    /* coordinates: rank 0 writes the small axes, every rank its latitude rows */
    int root = l->rank == 0;
    double *times = malloc(sizeof(double) * ntime);
    for (int r = 0; r < ntime; r++)
        times[r] = (double)(r + 1) * t->period_hours;
    size_t start = 0, count = root ? (size_t)ntime : 0;
    NC_TRY(h, nc_put_vara_double(ncid, time_var, &start, &count, times));
    free(times);

    float *axis = malloc(sizeof(float) * (size_t)(m->nlon > nlev ? m->nlon : nlev));
    for (int i = 0; i < m->nlon; i++)
        axis[i] = 360.0f * (float)i / (float)m->nlon;
    count = root ? (size_t)m->nlon : 0;
    NC_TRY(h, nc_put_vara_float(ncid, lon_var, &start, &count, axis));
    if (lev_var >= 0) {
        for (int k = 0; k < nlev; k++)
            axis[k] = (float)(k + 1);
        count = root ? (size_t)nlev : 0;
        NC_TRY(h, nc_put_vara_float(ncid, lev_var, &start, &count, axis));
    }
    free(axis);
    float *lats = malloc(sizeof(float) * (size_t)(l->nrows + 1));
    for (int j = 0; j < l->nrows; j++)
        lats[j] = -90.0f + 180.0f * ((float)(l->lat0 + j) + 0.5f) / (float)m->nlat;
    start = (size_t)l->lat0;
    count = (size_t)l->nrows;
    NC_TRY(h, nc_put_vara_float(ncid, lat_var, &start, &count, lats));
    free(lats);
}

static void *netcdf_create(const nob_layout *l, const char *dir, int file_per_field,
                           MPI_Comm comm)
{
    nc_files *h = calloc(1, sizeof *h);
    h->l = l;
    h->comm = comm;
    h->file_per_field = file_per_field;
    char path[4096];
    for (int t = 0; t < NOB_NTYPES; t++) {
        if (file_per_field) {
            for (int f = 0; f < nob_types[t].nfields; f++) {
                nob_file_path(path, sizeof path, dir, &nob_types[t], f, 1, "nc");
                define_file(h, t, f, f + 1, path);
            }
        } else {
            nob_file_path(path, sizeof path, dir, &nob_types[t], 0, 0, "nc");
            define_file(h, t, 0, nob_types[t].nfields, path);
        }
    }
    return h;
}

static void *netcdf_open_read(const nob_layout *l, const char *dir, int file_per_field,
                              MPI_Comm comm)
{
    nc_files *h = calloc(1, sizeof *h);
    h->l = l;
    h->comm = comm;
    h->file_per_field = file_per_field;
    char path[4096], name[32];
    for (int t = 0; t < NOB_NTYPES; t++) {
        int ncid = -1;
        for (int f = 0; f < nob_types[t].nfields; f++) {
            if (file_per_field || f == 0) {
                nob_file_path(path, sizeof path, dir, &nob_types[t], f, file_per_field, "nc");
                int status = nc_open_par(path, NC_NOWRITE, comm, MPI_INFO_NULL, &ncid);
                if (status != NC_NOERR)
                    nob_fail(comm, path, nc_strerror(status));
                int dimid;
                size_t ntime;
                NC_TRY(h, nc_inq_dimid(ncid, "time", &dimid));
                NC_TRY(h, nc_inq_dimlen(ncid, dimid, &ntime));
                if (ntime != (size_t)nob_total_records(l, &nob_types[t]))
                    nob_fail(comm, path, "time axis length differs from --days of this run");
            }
            nob_var_name(name, sizeof name, f);
            h->ncid[t][f] = ncid;
            NC_TRY(h, nc_inq_varid(ncid, name, &h->varid[t][f]));
            NC_TRY(h, nc_var_par_access(ncid, h->varid[t][f], NC_COLLECTIVE));
        }
    }
    return h;
}

static void hyperslab(const nc_files *h, int type, int rec0, int nrec, size_t *start,
                      size_t *count)
{
    const nob_output_type *t = &nob_types[type];
    int n = 0;
    start[n] = (size_t)rec0;
    count[n++] = (size_t)nrec;
    if (t->levkind != NOB_LEV_NONE) {
        start[n] = 0;
        count[n++] = (size_t)nob_nlev(h->l->model, t);
    }
    start[n] = (size_t)h->l->lat0;
    count[n++] = (size_t)h->l->nrows;
    start[n] = 0;
    count[n] = (size_t)h->l->model->nlon;
}

static void netcdf_write(void *vh, int type, int field, int rec0, int nrec, const float *block)
{
    nc_files *h = vh;
    size_t start[4], count[4];
    hyperslab(h, type, rec0, nrec, start, count);
    NC_TRY(h, nc_put_vara_float(h->ncid[type][field], h->varid[type][field], start, count,
                                block));
}

static void netcdf_read(void *vh, int type, int field, int rec0, int nrec, float *block)
{
    nc_files *h = vh;
    size_t start[4], count[4];
    hyperslab(h, type, rec0, nrec, start, count);
    NC_TRY(h, nc_get_vara_float(h->ncid[type][field], h->varid[type][field], start, count,
                                block));
}

static void netcdf_close(void *vh)
{
    nc_files *h = vh;
    for (int t = 0; t < NOB_NTYPES; t++)
        for (int f = 0; f < nob_types[t].nfields; f++)
            if (h->file_per_field || f == 0)
                NC_TRY(h, nc_close(h->ncid[t][f]));
    free(h);
}

const nob_backend nob_backend_netcdf = {
    "netcdf", netcdf_create, netcdf_write, netcdf_close, netcdf_open_read, netcdf_read,
};
