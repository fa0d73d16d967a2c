/* gribgen: write a deterministic set of GRIB2 forecast fields with a MARS local section.
 *
 * The set mimics one OpenIFS output step sequence ([OIFS-HECToR]): pressure-level fields
 * (t, u, v, z) on several levels and surface fields (2t, msl), for several steps, on a
 * regular lat/lon grid. Values are an analytic function of the field's keys and grid point,
 * so two runs write the same bytes and a retrieved field can be traced back to its request.
 *
 * usage: gribgen OUTPUT [NSTEPS [NLEVELS [NLAT NLON]]]
 * prints: gribgen: messages=N bytes=B
 */
#include <eccodes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const long PL_PARAMS[] = {130, 131, 132, 129}; /* t, u, v, z */
static const long SFC_PARAMS[] = {167, 151};          /* 2t, msl */
static const long LEVELS[] = {1000, 850, 700, 500, 250, 100};

#define CHECK(call)                                                                       \
    do {                                                                                  \
        int err_ = (call);                                                                \
        if (err_) {                                                                       \
            fprintf(stderr, "gribgen: %s failed: %s\n", #call, codes_get_error_message(err_)); \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

static void set_str(codes_handle *h, const char *key, const char *value) {
    size_t len = strlen(value);
    CHECK(codes_set_string(h, key, value, &len));
}

static void fill(double *v, long nlat, long nlon, long param, long level, long step) {
    for (long j = 0; j < nlat; j++) {
        double lat = 90.0 - 180.0 * j / (nlat - 1);
        for (long i = 0; i < nlon; i++) {
            double lon = 360.0 * i / nlon;
            v[j * nlon + i] = 250.0 + 0.1 * param + 0.01 * level + step +
                              20.0 * cos(lat * M_PI / 180.0) * sin((lon + 5.0 * step) * M_PI / 180.0);
        }
    }
}

static size_t write_field(FILE *out, codes_handle *h, long levtype_pl, long param,
                          long level, long step, long nlat, long nlon, double *values) {
    const void *buf;
    size_t len;
    /* typeOfLevel, not levtype: ecCodes 2.41 refuses to set levtype on GRIB 2 */
    set_str(h, "typeOfLevel", levtype_pl ? "isobaricInhPa" : "surface");
    if (levtype_pl) CHECK(codes_set_long(h, "level", level));
    CHECK(codes_set_long(h, "paramId", param));
    CHECK(codes_set_long(h, "step", step));
    fill(values, nlat, nlon, param, level, step);
    CHECK(codes_set_double_array(h, "values", values, (size_t)(nlat * nlon)));
    CHECK(codes_get_message(h, &buf, &len));
    if (fwrite(buf, 1, len, out) != len) {
        perror("gribgen: write");
        exit(2);
    }
    return len;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gribgen OUTPUT [NSTEPS [NLEVELS [NLAT NLON]]]\n");
        return 2;
    }
    long nsteps = argc > 2 ? atol(argv[2]) : 3;
    long nlevels = argc > 3 ? atol(argv[3]) : 3;
    long nlat = argc > 5 ? atol(argv[4]) : 37;
    long nlon = argc > 5 ? atol(argv[5]) : 72;
    long max_levels = (long)(sizeof LEVELS / sizeof LEVELS[0]);
    if (nsteps < 1 || nlevels < 1 || nlevels > max_levels || nlat < 2 || nlon < 2) {
        fprintf(stderr, "gribgen: need NSTEPS>=1, 1<=NLEVELS<=%ld, NLAT,NLON>=2\n", max_levels);
        return 2;
    }

    codes_handle *h = codes_grib_handle_new_from_samples(NULL, "GRIB2");
    if (!h) {
        fprintf(stderr, "gribgen: cannot load the GRIB2 sample\n");
        return 2;
    }
    /* MARS local section (local definition 1): what FDB indexes the fields by. */
    CHECK(codes_set_long(h, "setLocalDefinition", 1));
    CHECK(codes_set_long(h, "localDefinitionNumber", 1));
    set_str(h, "class", "od");
    set_str(h, "type", "fc");
    set_str(h, "stream", "oper");
    set_str(h, "expver", "0001");
    CHECK(codes_set_long(h, "dataDate", 20240101));
    CHECK(codes_set_long(h, "dataTime", 0));
    /* Regular lat/lon grid, north to south, simple packing with 16 bits. */
    CHECK(codes_set_long(h, "Ni", nlon));
    CHECK(codes_set_long(h, "Nj", nlat));
    CHECK(codes_set_double(h, "latitudeOfFirstGridPointInDegrees", 90.0));
    CHECK(codes_set_double(h, "longitudeOfFirstGridPointInDegrees", 0.0));
    CHECK(codes_set_double(h, "latitudeOfLastGridPointInDegrees", -90.0));
    CHECK(codes_set_double(h, "longitudeOfLastGridPointInDegrees", 360.0 - 360.0 / nlon));
    CHECK(codes_set_double(h, "iDirectionIncrementInDegrees", 360.0 / nlon));
    CHECK(codes_set_double(h, "jDirectionIncrementInDegrees", 180.0 / (nlat - 1)));
    CHECK(codes_set_long(h, "bitsPerValue", 16));

    FILE *out = fopen(argv[1], "wb");
    if (!out) {
        perror(argv[1]);
        return 2;
    }
    double *values = malloc(sizeof(double) * (size_t)(nlat * nlon));
    long messages = 0;
    size_t bytes = 0;
    for (long s = 0; s < nsteps; s++) {
        long step = 6 * s;
        for (size_t p = 0; p < sizeof PL_PARAMS / sizeof PL_PARAMS[0]; p++)
            for (long l = 0; l < nlevels; l++, messages++)
                bytes += write_field(out, h, 1, PL_PARAMS[p], LEVELS[l], step, nlat, nlon, values);
        for (size_t p = 0; p < sizeof SFC_PARAMS / sizeof SFC_PARAMS[0]; p++, messages++)
            bytes += write_field(out, h, 0, SFC_PARAMS[p], 0, step, nlat, nlon, values);
    }
    if (fclose(out) != 0) {
        perror("gribgen: close");
        return 2;
    }
    free(values);
    codes_handle_delete(h);
    printf("gribgen: messages=%ld bytes=%zu\n", messages, bytes);
    return 0;
}
