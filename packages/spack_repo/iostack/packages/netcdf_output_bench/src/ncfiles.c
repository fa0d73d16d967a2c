/* The NetCDF modes' files, following the seed's advice whatever the library: files
 * created and all metadata defined once, collective access, a fixed-length time axis and
 * no fill values. Their metadata follow the CF conventions (CF_CONVENTIONS). */
#include <stdio.h>
#include <stdlib.h>

#include "ncfiles.h"

typedef struct {
    const nob_nc_library *lib;
    const nob_layout *l;
    MPI_Comm comm;
    int file_per_field;
    int ncid[NOB_NTYPES][128];   /* the same ncid for all fields of a combined file */
    int varid[NOB_NTYPES][128];
} nc_files;

#define NC_TRY(h, call)                                                   \
    do {                                                                  \
        int status_ = (call);                                             \
        if (status_ != 0)                                                 \
            nob_fail((h)->comm, #call, (h)->lib->strerror(status_));      \
    } while (0)

static nc_files *new_files(const void *lib, const nob_layout *l, int file_per_field,
                           MPI_Comm comm)
{
    nc_files *h = calloc(1, sizeof *h);
    h->lib = lib;
    h->l = l;
    h->comm = comm;
    h->file_per_field = file_per_field;
    return h;
}

#define CF_CONVENTIONS "CF-1.11"

/* Text attributes of one variable (or NOB_NC_GLOBAL), {name, value} pairs up to a NULL name. */
typedef struct {
    const char *name, *value;
} nc_text_attr;

static void put_texts(nc_files *h, int ncid, int varid, const nc_text_attr *attrs)
{
    for (; attrs->name; attrs++)
        NC_TRY(h, h->lib->put_text(ncid, varid, attrs->name, attrs->value));
}

/* CF coordinate variables. Pressure levels run evenly from 1000 to 10 hPa, soil levels
 * 0.1 m apart: the benchmark's values are synthetic, the axes need physical units. */
static const nc_text_attr time_attrs[] = {
    {"standard_name", "time"}, {"long_name", "time"}, {"axis", "T"},
    {"units", "hours since 2000-01-01 00:00:00"}, {"calendar", "standard"},
    {"units_metadata", "leap_seconds: none"}, {NULL, NULL}};
static const nc_text_attr lat_attrs[] = {
    {"standard_name", "latitude"}, {"long_name", "latitude"}, {"axis", "Y"},
    {"units", "degrees_north"}, {NULL, NULL}};
static const nc_text_attr lon_attrs[] = {
    {"standard_name", "longitude"}, {"long_name", "longitude"}, {"axis", "X"},
    {"units", "degrees_east"}, {NULL, NULL}};
static const nc_text_attr plev_attrs[] = {
    {"standard_name", "air_pressure"}, {"long_name", "pressure level"}, {"axis", "Z"},
    {"units", "Pa"}, {"positive", "down"}, {NULL, NULL}};
static const nc_text_attr slev_attrs[] = {
    {"standard_name", "depth"}, {"long_name", "depth of soil level"}, {"axis", "Z"},
    {"units", "m"}, {"positive", "down"}, {NULL, NULL}};

static float level_value(nob_levkind kind, int k, int nlev)
{
    if (kind == NOB_LEV_PRESSURE)
        return (float)(100000.0 - 99000.0 * k / (nlev > 1 ? nlev - 1 : 1));
    return 0.1f * (float)(k + 1);
}

/* Rank 0 writes a whole small axis (the others take part with nothing to write). */
static void put_axis(nc_files *h, int ncid, int varid, size_t len, void *values,
                     nob_nc_transfer what)
{
    size_t start = 0, count = h->l->rank == 0 ? len : 0;
    NC_TRY(h, h->lib->vara(ncid, varid, 1, &start, &count, values, what));
}

/* Define one file holding fields [f0, f1) of type t, then write its coordinates. */
static void define_file(nc_files *h, int type, int f0, int f1, const char *path)
{
    const nob_nc_library *lib = h->lib;
    const nob_layout *l = h->l;
    const nob_model *m = l->model;
    const nob_output_type *t = &nob_types[type];
    const char *levname = nob_lev_dim_name(t);
    int nlev = nob_nlev(m, t), ntime = nob_total_records(l, t);
    int ncid, dim[4], ndims = 0;
    int time_var, lat_var, lon_var, lev_var = -1;

    int status = lib->create(h->comm, path, &ncid);
    if (status != 0)
        nob_fail(h->comm, path, lib->strerror(status));
    /* fixed time axis: an unlimited one costs a metadata update per write */
    NC_TRY(h, lib->def_dim(ncid, "time", (size_t)ntime, &dim[ndims++]));
    if (levname)
        NC_TRY(h, lib->def_dim(ncid, levname, (size_t)nlev, &dim[ndims++]));
    NC_TRY(h, lib->def_dim(ncid, "lat", (size_t)m->nlat, &dim[ndims++]));
    NC_TRY(h, lib->def_dim(ncid, "lon", (size_t)m->nlon, &dim[ndims++]));

    NC_TRY(h, lib->def_var(ncid, "time", 1, 1, &dim[0], &time_var));
    put_texts(h, ncid, time_var, time_attrs);
    if (levname) {
        NC_TRY(h, lib->def_var(ncid, levname, 0, 1, &dim[1], &lev_var));
        put_texts(h, ncid, lev_var, t->levkind == NOB_LEV_PRESSURE ? plev_attrs : slev_attrs);
    }
    NC_TRY(h, lib->def_var(ncid, "lat", 0, 1, &dim[ndims - 2], &lat_var));
    put_texts(h, ncid, lat_var, lat_attrs);
    NC_TRY(h, lib->def_var(ncid, "lon", 0, 1, &dim[ndims - 1], &lon_var));
    put_texts(h, ncid, lon_var, lon_attrs);

    for (int f = f0; f < f1; f++) {
        char name[32], long_name[96];
        nob_var_name(name, sizeof name, f);
        snprintf(long_name, sizeof long_name, "%s output field %d (synthetic values)", t->name,
                 f + 1);
        NC_TRY(h, lib->def_var(ncid, name, 0, ndims, dim, &h->varid[type][f]));
        if (lib->def_field)
            NC_TRY(h, lib->def_field(ncid, h->varid[type][f]));
        const nc_text_attr field_attrs[] = {
            {"long_name", long_name}, {"units", "1"}, {"output_type", t->name}, {NULL, NULL}};
        put_texts(h, ncid, h->varid[type][f], field_attrs);
        h->ncid[type][f] = ncid;
    }
    char title[96];
    snprintf(title, sizeof title, "%s daily output of type %s, as written by the INM RAS model",
             m->name, t->name);
    const nc_text_attr global_attrs[] = {
        {"Conventions", CF_CONVENTIONS}, {"title", title},
        {"source", "netcdf-output-bench"}, {"model", m->name}, {"output_type", t->name},
        /* no date: the files are byte-stable from run to run */
        {"history", "written by netcdf-output-bench"},
        {"comment", "values are synthetic: k/16 for an integer k that depends on field, "
                    "record, level, latitude and longitude"},
        {NULL, NULL}};
    put_texts(h, ncid, NOB_NC_GLOBAL, global_attrs);
    NC_TRY(h, lib->enddef(ncid));

    if (lib->collective) {
        int vars[] = {time_var, lat_var, lon_var, lev_var};
        for (size_t v = 0; v < 4; v++)
            if (vars[v] >= 0)
                NC_TRY(h, lib->collective(ncid, vars[v]));
        for (int f = f0; f < f1; f++)
            NC_TRY(h, lib->collective(ncid, h->varid[type][f]));
    }

    /* coordinates: rank 0 writes the small axes, every rank its latitude rows */
    double *times = malloc(sizeof(double) * ntime);
    for (int r = 0; r < ntime; r++)
        times[r] = (double)(r + 1) * t->period_hours;
    put_axis(h, ncid, time_var, (size_t)ntime, times, NOB_PUT_DOUBLE);
    free(times);

    float *axis = malloc(sizeof(float) * (size_t)(m->nlon > nlev ? m->nlon : nlev));
    for (int i = 0; i < m->nlon; i++)
        axis[i] = 360.0f * (float)i / (float)m->nlon;
    put_axis(h, ncid, lon_var, (size_t)m->nlon, axis, NOB_PUT_FLOAT);
    if (lev_var >= 0) {
        for (int k = 0; k < nlev; k++)
            axis[k] = level_value(t->levkind, k, nlev);
        put_axis(h, ncid, lev_var, (size_t)nlev, axis, NOB_PUT_FLOAT);
    }
    free(axis);
    float *lats = malloc(sizeof(float) * (size_t)(l->nrows + 1));
    for (int j = 0; j < l->nrows; j++)
        lats[j] = -90.0f + 180.0f * ((float)(l->lat0 + j) + 0.5f) / (float)m->nlat;
    size_t start = (size_t)l->lat0, count = (size_t)l->nrows;
    NC_TRY(h, lib->vara(ncid, lat_var, 1, &start, &count, lats, NOB_PUT_FLOAT));
    free(lats);
}

void *nob_nc_create(const void *lib, const nob_layout *l, const char *dir, int file_per_field,
                    const nob_io_options *io, MPI_Comm comm)
{
    nc_files *h = new_files(lib, l, file_per_field, comm);
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
        /* the fields' access as asked (define_file leaves every variable collective) */
        if (io->independent)
            for (int f = 0; f < nob_types[t].nfields; f++)
                NC_TRY(h, h->lib->independent(h->ncid[t][f], h->varid[t][f]));
    }
    return h;
}

void *nob_nc_open_read(const void *lib, const nob_layout *l, const char *dir,
                       int file_per_field, MPI_Comm comm)
{
    nc_files *h = new_files(lib, l, file_per_field, comm);
    const nob_nc_library *calls = h->lib;
    char path[4096], name[32];
    for (int t = 0; t < NOB_NTYPES; t++) {
        int ncid = -1;
        for (int f = 0; f < nob_types[t].nfields; f++) {
            if (file_per_field || f == 0) {
                nob_file_path(path, sizeof path, dir, &nob_types[t], f, file_per_field, "nc");
                int status = calls->open(comm, path, &ncid);
                if (status != 0)
                    nob_fail(comm, path, calls->strerror(status));
                size_t ntime;
                NC_TRY(h, calls->dim_len(ncid, "time", &ntime));
                if (ntime != (size_t)nob_total_records(l, &nob_types[t]))
                    nob_fail(comm, path, "time axis length differs from --days of this run");
            }
            nob_var_name(name, sizeof name, f);
            h->ncid[t][f] = ncid;
            NC_TRY(h, calls->var_id(ncid, name, &h->varid[t][f]));
            if (calls->collective)
                NC_TRY(h, calls->collective(ncid, h->varid[t][f]));
        }
    }
    return h;
}

/* A field's records [rec0, rec0 + nrec) on this rank's latitude rows. */
static void transfer(nc_files *h, int type, int field, int rec0, int nrec, void *block,
                     nob_nc_transfer what)
{
    const nob_output_type *t = &nob_types[type];
    size_t start[4], count[4];
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
    count[n++] = (size_t)h->l->model->nlon;
    NC_TRY(h, h->lib->vara(h->ncid[type][field], h->varid[type][field], n, start, count, block,
                           what));
}

void nob_nc_write(void *h, int type, int field, int rec0, int nrec, const float *block)
{
    /* the library does not write through the pointer when putting */
    transfer(h, type, field, rec0, nrec, (void *)block, NOB_PUT_FLOAT);
}

void nob_nc_read(void *h, int type, int field, int rec0, int nrec, float *block)
{
    transfer(h, type, field, rec0, nrec, block, NOB_GET_FLOAT);
}

void nob_nc_sync(void *vh, int type)
{
    nc_files *h = vh;
    for (int f = 0; f < nob_types[type].nfields; f++)
        if (h->file_per_field || f == 0)
            NC_TRY(h, h->lib->sync(h->ncid[type][f]));
}

void nob_nc_close(void *vh)
{
    nc_files *h = vh;
    for (int t = 0; t < NOB_NTYPES; t++)
        for (int f = 0; f < nob_types[t].nfields; f++)
            if (h->file_per_field || f == 0)
                NC_TRY(h, h->lib->close(h->ncid[t][f]));
    free(h);
}
