/* PnetCDF (CDF-5) version of the same files: collective *_all calls, fixed
 * time axis, no fill. Kept in its own file because pnetcdf.h and netcdf.h
 * define the same NC_* macros. */
#include <stdlib.h>
#include <string.h>

#include <pnetcdf.h>

#include "backend.h"

typedef struct {
    const nob_layout *l;
    MPI_Comm comm;
    int file_per_field;
    int ncid[NOB_NTYPES][128];
    int varid[NOB_NTYPES][128];
} pnc_files;

#define PNC_TRY(h, call)                                                  \
    do {                                                                  \
        int status_ = (call);                                             \
        if (status_ != NC_NOERR)                                          \
            nob_fail((h)->comm, #call, ncmpi_strerror(status_));          \
    } while (0)

static void put_text(pnc_files *h, int ncid, int varid, const char *name, const char *text)
{
    PNC_TRY(h, ncmpi_put_att_text(ncid, varid, name, (MPI_Offset)strlen(text), text));
}

static void define_file(pnc_files *h, int type, int f0, int f1, const char *path)
{
    const nob_layout *l = h->l;
    const nob_model *m = l->model;
    const nob_output_type *t = &nob_types[type];
    const char *levname = nob_lev_dim_name(t);
    int nlev = nob_nlev(m, t), ntime = nob_total_records(l, t);
    int ncid, old_fill, dim[4], ndims = 0;
    int time_var, lat_var, lon_var, lev_var = -1;

    PNC_TRY(h, ncmpi_create(h->comm, path, NC_CLOBBER | NC_64BIT_DATA, MPI_INFO_NULL, &ncid));
    PNC_TRY(h, ncmpi_set_fill(ncid, NC_NOFILL, &old_fill));
    PNC_TRY(h, ncmpi_def_dim(ncid, "time", ntime, &dim[ndims++]));
    if (levname)
        PNC_TRY(h, ncmpi_def_dim(ncid, levname, nlev, &dim[ndims++]));
    PNC_TRY(h, ncmpi_def_dim(ncid, "lat", m->nlat, &dim[ndims++]));
    PNC_TRY(h, ncmpi_def_dim(ncid, "lon", m->nlon, &dim[ndims++]));

    PNC_TRY(h, ncmpi_def_var(ncid, "time", NC_DOUBLE, 1, &dim[0], &time_var));
    put_text(h, ncid, time_var, "units", "hours since 2000-01-01 00:00:00");
    if (levname) {
        PNC_TRY(h, ncmpi_def_var(ncid, levname, NC_FLOAT, 1, &dim[1], &lev_var));
        put_text(h, ncid, lev_var, "long_name", t->levkind == NOB_LEV_PRESSURE
                                                    ? "pressure level index"
                                                    : "soil level index");
    }
    PNC_TRY(h, ncmpi_def_var(ncid, "lat", NC_FLOAT, 1, &dim[ndims - 2], &lat_var));
    put_text(h, ncid, lat_var, "units", "degrees_north");
    PNC_TRY(h, ncmpi_def_var(ncid, "lon", NC_FLOAT, 1, &dim[ndims - 1], &lon_var));
    put_text(h, ncid, lon_var, "units", "degrees_east");

    for (int f = f0; f < f1; f++) {
        char name[32];
        nob_var_name(name, sizeof name, f);
        PNC_TRY(h, ncmpi_def_var(ncid, name, NC_FLOAT, ndims, dim, &h->varid[type][f]));
        put_text(h, ncid, h->varid[type][f], "output_type", t->name);
        h->ncid[type][f] = ncid;
    }
    put_text(h, ncid, NC_GLOBAL, "source", "netcdf-output-bench");
    put_text(h, ncid, NC_GLOBAL, "model", m->name);
    put_text(h, ncid, NC_GLOBAL, "output_type", t->name);
    PNC_TRY(h, ncmpi_enddef(ncid));

    int root = l->rank == 0;
    double *times = malloc(sizeof(double) * ntime);
    for (int r = 0; r < ntime; r++)
        times[r] = (double)(r + 1) * t->period_hours;
    MPI_Offset start = 0, count = root ? ntime : 0;
    PNC_TRY(h, ncmpi_put_vara_double_all(ncid, time_var, &start, &count, times));
    free(times);

    float *axis = malloc(sizeof(float) * (size_t)(m->nlon > nlev ? m->nlon : nlev));
    for (int i = 0; i < m->nlon; i++)
        axis[i] = 360.0f * (float)i / (float)m->nlon;
    count = root ? m->nlon : 0;
    PNC_TRY(h, ncmpi_put_vara_float_all(ncid, lon_var, &start, &count, axis));
    if (lev_var >= 0) {
        for (int k = 0; k < nlev; k++)
            axis[k] = (float)(k + 1);
        count = root ? nlev : 0;
        PNC_TRY(h, ncmpi_put_vara_float_all(ncid, lev_var, &start, &count, axis));
    }
    free(axis);
    float *lats = malloc(sizeof(float) * (size_t)(l->nrows + 1));
    for (int j = 0; j < l->nrows; j++)
        lats[j] = -90.0f + 180.0f * ((float)(l->lat0 + j) + 0.5f) / (float)m->nlat;
    start = l->lat0;
    count = l->nrows;
    PNC_TRY(h, ncmpi_put_vara_float_all(ncid, lat_var, &start, &count, lats));
    free(lats);
}

static void *pnetcdf_create(const nob_layout *l, const char *dir, int file_per_field,
                            MPI_Comm comm)
{
    pnc_files *h = calloc(1, sizeof *h);
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

static void *pnetcdf_open_read(const nob_layout *l, const char *dir, int file_per_field,
                               MPI_Comm comm)
{
    pnc_files *h = calloc(1, sizeof *h);
    h->l = l;
    h->comm = comm;
    h->file_per_field = file_per_field;
    char path[4096], name[32];
    for (int t = 0; t < NOB_NTYPES; t++) {
        int ncid = -1;
        for (int f = 0; f < nob_types[t].nfields; f++) {
            if (file_per_field || f == 0) {
                nob_file_path(path, sizeof path, dir, &nob_types[t], f, file_per_field, "nc");
                int status = ncmpi_open(comm, path, NC_NOWRITE, MPI_INFO_NULL, &ncid);
                if (status != NC_NOERR)
                    nob_fail(comm, path, ncmpi_strerror(status));
                int dimid;
                MPI_Offset ntime;
                PNC_TRY(h, ncmpi_inq_dimid(ncid, "time", &dimid));
                PNC_TRY(h, ncmpi_inq_dimlen(ncid, dimid, &ntime));
                if (ntime != nob_total_records(l, &nob_types[t]))
                    nob_fail(comm, path, "time axis length differs from --days of this run");
            }
            nob_var_name(name, sizeof name, f);
            h->ncid[t][f] = ncid;
            PNC_TRY(h, ncmpi_inq_varid(ncid, name, &h->varid[t][f]));
        }
    }
    return h;
}

static void hyperslab(const pnc_files *h, int type, int rec0, int nrec, MPI_Offset *start,
                      MPI_Offset *count)
{
    const nob_output_type *t = &nob_types[type];
    int n = 0;
    start[n] = rec0;
    count[n++] = nrec;
    if (t->levkind != NOB_LEV_NONE) {
        start[n] = 0;
        count[n++] = nob_nlev(h->l->model, t);
    }
    start[n] = h->l->lat0;
    count[n++] = h->l->nrows;
    start[n] = 0;
    count[n] = h->l->model->nlon;
}

static void pnetcdf_write(void *vh, int type, int field, int rec0, int nrec, const float *block)
{
    pnc_files *h = vh;
    MPI_Offset start[4], count[4];
    hyperslab(h, type, rec0, nrec, start, count);
    PNC_TRY(h, ncmpi_put_vara_float_all(h->ncid[type][field], h->varid[type][field], start,
                                        count, block));
}

static void pnetcdf_read(void *vh, int type, int field, int rec0, int nrec, float *block)
{
    pnc_files *h = vh;
    MPI_Offset start[4], count[4];
    hyperslab(h, type, rec0, nrec, start, count);
    PNC_TRY(h, ncmpi_get_vara_float_all(h->ncid[type][field], h->varid[type][field], start,
                                        count, block));
}

static void pnetcdf_close(void *vh)
{
    pnc_files *h = vh;
    for (int t = 0; t < NOB_NTYPES; t++)
        for (int f = 0; f < nob_types[t].nfields; f++)
            if (h->file_per_field || f == 0)
                PNC_TRY(h, ncmpi_close(h->ncid[t][f]));
    free(h);
}

const nob_backend nob_backend_pnetcdf = {
    "pnetcdf", pnetcdf_create, pnetcdf_write, pnetcdf_close, pnetcdf_open_read, pnetcdf_read,
};
