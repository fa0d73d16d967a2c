/* INMCM6 atmosphere output workload ([INMCM-NetCDF]): grids, output types, the
 * latitude-block decomposition, the deterministic field values and the
 * order-independent data checksum shared by every writer and reader. */
#ifndef NOB_WORKLOAD_H
#define NOB_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#define NOB_NTYPES 6
#define NOB_HOURS_PER_DAY 24

typedef struct {
    const char *name;        /* inmcm6p, inmcm6m */
    int nlat, nlon, nplevs, nslevs;
} nob_model;

typedef enum { NOB_LEV_NONE, NOB_LEV_PRESSURE, NOB_LEV_SOIL } nob_levkind;

typedef struct {
    const char *name;        /* dxu, dxyz, dxys, 6h, 3h, 1h */
    int nfields;
    int period_hours;        /* one record every period_hours */
    nob_levkind levkind;
    int first_uid;           /* uid of field 0: fields numbered across all types */
} nob_output_type;

/* Shapes of one run: everything a writer or reader needs to address data. */
typedef struct {
    const nob_model *model;
    int ndays;
    int nranks, rank;
    int lat0, nrows;         /* this rank's block of latitude rows */
} nob_layout;

extern const nob_output_type nob_types[NOB_NTYPES];

const nob_model *nob_find_model(const char *name);
int nob_total_fields(void);
int nob_nlev(const nob_model *m, const nob_output_type *t);
int nob_records_per_day(const nob_output_type *t);
int nob_total_records(const nob_layout *l, const nob_output_type *t);
void nob_block_rows(int nlat, int nranks, int rank, int *lat0, int *nrows);
/* Float32 data bytes of the whole run: the seed's MB/day is this for one day. */
uint64_t nob_data_bytes(const nob_model *m, int ndays);

/* Value at (field uid, record, level, global lat j, global lon i). A small
 * integer over 16, so it is exact in float32 and identical on any rank. */
float nob_value(int uid, int rec, int lev, int j, int i);

/* Fill a local block laid out [nrec][nlev][nrows][nlon]. */
void nob_fill(const nob_layout *l, const nob_output_type *t, int field,
              int rec0, int nrec, float *buf);

/* Checksum term sum over a local block in the same layout; adding the
 * per-rank sums (mod 2^64) gives a value independent of decomposition,
 * file layout and write order. */
uint64_t nob_checksum_block(const nob_layout *l, const nob_output_type *t,
                            int field, int rec0, int nrec, const float *buf);

/* Count values in a local block that differ (bitwise) from nob_value. */
size_t nob_count_mismatches(const nob_layout *l, const nob_output_type *t,
                            int field, int rec0, int nrec, const float *buf,
                            long *first_bad_index);

size_t nob_block_values(const nob_layout *l, const nob_output_type *t, int nrec);

#endif
