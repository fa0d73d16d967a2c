#include "workload.h"

#include <string.h>

static const nob_model models[] = {
    {"inmcm6p", 120, 180, 17, 21},
    {"inmcm6m", 180, 288, 26, 73},
};

/* Field counts, periods and dimensionality of the atmosphere output ([INMCM-NetCDF]). */
const nob_output_type nob_types[NOB_NTYPES] = {
    {"dxu", 71, 24, NOB_LEV_NONE, 0},
    {"dxyz", 7, 24, NOB_LEV_PRESSURE, 71},
    {"dxys", 10, 24, NOB_LEV_SOIL, 78},
    {"6h", 44, 6, NOB_LEV_NONE, 88},
    {"3h", 37, 3, NOB_LEV_NONE, 132},
    {"1h", 2, 1, NOB_LEV_NONE, 169},
};

const nob_model *nob_find_model(const char *name)
{
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++)
        if (strcmp(models[k].name, name) == 0)
            return &models[k];
    return NULL;
}

int nob_total_fields(void)
{
    int n = 0;
    for (int t = 0; t < NOB_NTYPES; t++)
        n += nob_types[t].nfields;
    return n;
}

int nob_nlev(const nob_model *m, const nob_output_type *t)
{
    switch (t->levkind) {
    case NOB_LEV_PRESSURE: return m->nplevs;
    case NOB_LEV_SOIL: return m->nslevs;
    default: return 1;
    }
}

int nob_records_per_day(const nob_output_type *t)
{
    return NOB_HOURS_PER_DAY / t->period_hours;
}

int nob_total_records(const nob_layout *l, const nob_output_type *t)
{
    return l->ndays * nob_records_per_day(t);
}

void nob_block_rows(int nlat, int nranks, int rank, int *lat0, int *nrows)
{
    int base = nlat / nranks, extra = nlat % nranks;
    *nrows = base + (rank < extra);
    *lat0 = rank * base + (rank < extra ? rank : extra);
}

uint64_t nob_data_bytes(const nob_model *m, int ndays)
{
    uint64_t values = 0;
    for (int t = 0; t < NOB_NTYPES; t++) {
        const nob_output_type *ty = &nob_types[t];
        values += (uint64_t)ty->nfields * nob_records_per_day(ty) * nob_nlev(m, ty)
                  * m->nlat * m->nlon;
    }
    return values * sizeof(float) * (uint64_t)ndays;
}

static uint32_t mix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    h ^= h >> 16;
    return h;
}

float nob_value(int uid, int rec, int lev, int j, int i)
{
    uint32_t key = (uint32_t)uid;
    key = key * 1000003U + (uint32_t)rec;
    key = key * 1000003U + (uint32_t)lev;
    key = key * 1000003U + (uint32_t)j;
    key = key * 1000003U + (uint32_t)i;
    /* 20 significant bits: exactly representable, so no rounding anywhere */
    return (float)(mix32(key) >> 12) / 16.0f;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

size_t nob_block_values(const nob_layout *l, const nob_output_type *t, int nrec)
{
    return (size_t)nrec * nob_nlev(l->model, t) * l->nrows * l->model->nlon;
}

/* Walk a local block [nrec][nlev][nrows][nlon] in storage order. */
#define FOR_BLOCK(l, t, rec0, nrec)                                         \
    for (int r_ = 0, nlev_ = nob_nlev((l)->model, (t)); r_ < (nrec); r_++) \
        for (int k_ = 0; k_ < nlev_; k_++)                                  \
            for (int jj_ = 0; jj_ < (l)->nrows; jj_++)                      \
                for (int i_ = 0; i_ < (l)->model->nlon; i_++)

void nob_fill(const nob_layout *l, const nob_output_type *t, int field,
              int rec0, int nrec, float *buf)
{
    size_t n = 0;
    int uid = t->first_uid + field;
    FOR_BLOCK(l, t, rec0, nrec)
        buf[n++] = nob_value(uid, rec0 + r_, k_, l->lat0 + jj_, i_);
}

uint64_t nob_checksum_block(const nob_layout *l, const nob_output_type *t,
                            int field, int rec0, int nrec, const float *buf)
{
    uint64_t sum = 0;
    size_t n = 0;
    uint64_t uid = (uint64_t)(t->first_uid + field);
    FOR_BLOCK(l, t, rec0, nrec) {
        uint32_t bits;
        memcpy(&bits, &buf[n++], sizeof bits);
        /* position-bound term: moving a value to another place changes the sum */
        uint64_t where = uid << 48 | (uint64_t)(rec0 + r_) << 28 | (uint64_t)k_ << 20
                         | (uint64_t)(l->lat0 + jj_) << 10 | (uint64_t)i_;
        sum += splitmix64(splitmix64(where) + bits);
    }
    return sum;
}

size_t nob_count_mismatches(const nob_layout *l, const nob_output_type *t,
                            int field, int rec0, int nrec, const float *buf,
                            long *first_bad_index)
{
    size_t bad = 0, n = 0;
    int uid = t->first_uid + field;
    FOR_BLOCK(l, t, rec0, nrec) {
        float want = nob_value(uid, rec0 + r_, k_, l->lat0 + jj_, i_);
        if (memcmp(&want, &buf[n], sizeof want) != 0) {
            if (bad == 0 && first_bad_index)
                *first_bad_index = (long)n;
            bad++;
        }
        n++;
    }
    return bad;
}
