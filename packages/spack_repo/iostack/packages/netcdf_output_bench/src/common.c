#include <stdio.h>

#include "backend.h"

void nob_file_path(char *out, size_t outlen, const char *dir, const nob_output_type *t,
                   int field, int file_per_field, const char *ext)
{
    if (file_per_field)
        snprintf(out, outlen, "%s/%s_field_%02d.%s", dir, t->name, field + 1, ext);
    else
        snprintf(out, outlen, "%s/%s.%s", dir, t->name, ext);
}

void nob_var_name(char *out, size_t outlen, int field)
{
    snprintf(out, outlen, "field_%02d", field + 1);
}

const char *nob_lev_dim_name(const nob_output_type *t)
{
    switch (t->levkind) {
    case NOB_LEV_PRESSURE: return "plev";
    case NOB_LEV_SOIL: return "slev";
    default: return NULL;
    }
}

void nob_fail(MPI_Comm comm, const char *what, const char *detail)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    fprintf(stderr, "netcdf-output-bench: rank %d: %s: %s\n", rank, what, detail);
    fflush(stderr);
    MPI_Abort(comm, 3);
}
