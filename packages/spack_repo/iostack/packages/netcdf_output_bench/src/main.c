/* netcdf-output-bench: writes one INMCM6 atmosphere output workload ([INMCM-NetCDF])
 * in one of four ways and reports bytes, time and a data checksum.
 *
 *   serial    gather each field to rank 0, one direct-access binary file per field
 *   separate  one NetCDF file per field, every rank writes its latitude rows
 *   combined  one NetCDF file per output type
 *   batching  combined, holding --batch records of each field before one write
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <mpi.h>

#include "backend.h"
#include "workload.h"

enum { MODE_SERIAL, MODE_SEPARATE, MODE_COMBINED, MODE_BATCHING, NMODES };
static const char *const mode_names[NMODES] = {"serial", "separate", "combined", "batching"};
/* in nob_sync_mode's order */
static const char *const sync_names[] = {"none", "step", "close"};

enum { EXIT_USAGE = 1, EXIT_VERIFY_FAILED = 2 };

typedef struct {
    int mode;
    const nob_backend *backend;
    const nob_model *model;
    int days, batch;
    const char *output_dir;
    int verify, verify_only, plan_only;
    nob_io_options io;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: netcdf-output-bench [options]\n"
            "  --mode serial|separate|combined|batching   (default batching)\n"
            "  --library netcdf|pnetcdf   NetCDF library for the NetCDF modes (default netcdf)\n"
            "  --model inmcm6p|inmcm6m    grid sizes (default inmcm6p)\n"
            "  --days N                   simulated days (default 1)\n"
            "  --batch N                  records held per field in batching mode (default 8)\n"
            "  --sync none|step|close     fsync / nc_sync / ncmpi_sync the files after every\n"
            "                             output step that wrote them, or once before closing\n"
            "                             (default none: only the library's own syncs)\n"
            "  --access collective|independent   NetCDF field writes (default collective;\n"
            "                             independent with --library netcdf only)\n"
            "  --output-dir DIR           where files go (default netcdf-output-bench.out)\n"
            "  --verify                   read the files back after writing and check them\n"
            "  --verify-only              only check files an earlier run wrote\n"
            "  --plan-only                print the workload sizes and exit\n"
            "  --version                  print the version and exit\n");
}

static int parse_positive(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > 10000)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_options(int argc, char **argv, options *o, int rank)
{
    static const struct option longopts[] = {
        {"mode", required_argument, NULL, 'm'},    {"library", required_argument, NULL, 'l'},
        {"model", required_argument, NULL, 'M'},   {"days", required_argument, NULL, 'd'},
        {"batch", required_argument, NULL, 'b'},   {"output-dir", required_argument, NULL, 'o'},
        {"verify", no_argument, NULL, 'v'},        {"verify-only", no_argument, NULL, 'V'},
        {"plan-only", no_argument, NULL, 'p'},     {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, '5'},       {"sync", required_argument, NULL, 's'},
        {"access", required_argument, NULL, 'a'},  {NULL, 0, NULL, 0},
    };
    const char *library = "netcdf", *bad = "invalid arguments";
    *o = (options){MODE_BATCHING, NULL, nob_find_model("inmcm6p"), 1, 8,
                   "netcdf-output-bench.out", 0, 0, 0, {NOB_SYNC_NONE, 0}};
    int c;
    opterr = rank == 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->mode = -1;
            for (int k = 0; k < NMODES; k++)
                if (strcmp(optarg, mode_names[k]) == 0)
                    o->mode = k;
            if (o->mode < 0)
                goto bad;
            break;
        case 'l': library = optarg; break;
        case 'M':
            if (!(o->model = nob_find_model(optarg)))
                goto bad;
            break;
        case 'd':
            if (parse_positive(optarg, &o->days))
                goto bad;
            break;
        case 'b':
            if (parse_positive(optarg, &o->batch))
                goto bad;
            break;
        case 'o': o->output_dir = optarg; break;
        case 'v': o->verify = 1; break;
        case 'V': o->verify_only = 1; break;
        case 'p': o->plan_only = 1; break;
        case 's': {
            int k = 0;
            while (k <= NOB_SYNC_CLOSE && strcmp(optarg, sync_names[k]) != 0)
                k++;
            if (k > NOB_SYNC_CLOSE)
                goto bad;
            o->io.sync = (nob_sync_mode)k;
            break;
        }
        case 'a':
            if (strcmp(optarg, "collective") != 0 && strcmp(optarg, "independent") != 0)
                goto bad;
            o->io.independent = strcmp(optarg, "independent") == 0;
            break;
        case 'h': if (rank == 0) usage(stdout); return -2;
        case '5': if (rank == 0) printf("netcdf-output-bench %s\n", NOB_VERSION); return -2;
        default: goto bad;
        }
    }
    if (optind != argc)
        goto bad;
    if (o->mode == MODE_SERIAL)
        o->backend = &nob_backend_posix;   /* the original model's files need no library */
    else if (strcmp(library, "netcdf") == 0)
        o->backend = &nob_backend_netcdf;
    else if (strcmp(library, "pnetcdf") == 0)
        o->backend = &nob_backend_pnetcdf;
    else
        goto bad;
    if (o->io.independent && o->backend != &nob_backend_netcdf) {
        bad = "--access independent needs --library netcdf and a NetCDF mode";
        goto bad;
    }
    return 0;
bad:
    if (rank == 0) {
        fprintf(stderr, "netcdf-output-bench: %s\n", bad);
        usage(stderr);
    }
    return -1;
}

static void make_dirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(buf, 0755);
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        nob_fail(MPI_COMM_WORLD, path, strerror(errno));
}

static int file_count(int mode)
{
    return mode == MODE_SERIAL || mode == MODE_SEPARATE ? nob_total_fields() : NOB_NTYPES;
}

static void print_plan(const options *o)
{
    const nob_model *m = o->model;
    for (int t = 0; t < NOB_NTYPES; t++) {
        const nob_output_type *ty = &nob_types[t];
        uint64_t per_day = (uint64_t)ty->nfields * nob_records_per_day(ty)
                           * nob_nlev(m, ty) * m->nlat * m->nlon * sizeof(float);
        printf("plan: type=%s fields=%d levels=%d records_per_day=%d bytes_per_day=%" PRIu64
               "\n", ty->name, ty->nfields, nob_nlev(m, ty), nob_records_per_day(ty), per_day);
    }
    uint64_t bytes = nob_data_bytes(m, o->days);
    printf("plan: model=%s nlat=%d nlon=%d nplevs=%d nslevs=%d days=%d fields=%d bytes=%" PRIu64
           " MB=%.3f MiB=%.3f\n", m->name, m->nlat, m->nlon, m->nplevs, m->nslevs, o->days,
           nob_total_fields(), bytes, bytes / 1e6, bytes / 1048576.0);
}

/* The model loop: hourly steps; an output type emits a record every
 * period_hours. Only the backend calls are timed, not making the data, in three phases:
 * create (files and metadata), write (records, and --sync step's syncs), close (with
 * --sync close's syncs). */
static void run_write(const options *o, const nob_layout *l, MPI_Comm comm)
{
    int file_per_field = o->mode == MODE_SERIAL || o->mode == MODE_SEPARATE;
    int batch = o->mode == MODE_BATCHING ? o->batch : 1;
    float *held[NOB_NTYPES];
    int nheld[NOB_NTYPES] = {0};
    size_t record_values[NOB_NTYPES];
    uint64_t checksum = 0;
    enum { CREATE, WRITE, CLOSE, NPHASES };
    double phase[NPHASES] = {0}, t0;

    for (int t = 0; t < NOB_NTYPES; t++) {
        int cap = batch < nob_total_records(l, &nob_types[t]) ? batch
                                                               : nob_total_records(l, &nob_types[t]);
        record_values[t] = nob_block_values(l, &nob_types[t], 1);
        held[t] = malloc(sizeof(float) * (record_values[t] * cap * nob_types[t].nfields + 1));
        if (!held[t])
            nob_fail(comm, "malloc", "batch buffers do not fit in memory");
    }

    MPI_Barrier(comm);
    t0 = MPI_Wtime();
    void *files = o->backend->create(o->backend->lib, l, o->output_dir, file_per_field, &o->io,
                                     comm);
    phase[CREATE] += MPI_Wtime() - t0;

    for (int day = 0; day < o->days; day++)
        for (int hour = 1; hour <= NOB_HOURS_PER_DAY; hour++)
            for (int t = 0; t < NOB_NTYPES; t++) {
                const nob_output_type *ty = &nob_types[t];
                if (hour % ty->period_hours != 0)
                    continue;
                int rec = day * nob_records_per_day(ty) + hour / ty->period_hours - 1;
                int last = rec == nob_total_records(l, ty) - 1;
                int cap = batch < nob_total_records(l, ty) ? batch : nob_total_records(l, ty);
                for (int f = 0; f < ty->nfields; f++) {
                    float *slot = held[t] + record_values[t] * ((size_t)f * cap + nheld[t]);
                    nob_fill(l, ty, f, rec, 1, slot);
                    checksum += nob_checksum_block(l, ty, f, rec, 1, slot);
                }
                if (++nheld[t] < cap && !last)
                    continue;
                int rec0 = rec - nheld[t] + 1;
                t0 = MPI_Wtime();
                for (int f = 0; f < ty->nfields; f++)
                    o->backend->write(files, t, f, rec0, nheld[t],
                                      held[t] + record_values[t] * (size_t)f * cap);
                if (o->io.sync == NOB_SYNC_STEP)
                    o->backend->sync(files, t);
                phase[WRITE] += MPI_Wtime() - t0;
                nheld[t] = 0;
            }

    t0 = MPI_Wtime();
    if (o->io.sync == NOB_SYNC_CLOSE)
        for (int t = 0; t < NOB_NTYPES; t++)
            o->backend->sync(files, t);
    o->backend->close(files);
    phase[CLOSE] += MPI_Wtime() - t0;
    for (int t = 0; t < NOB_NTYPES; t++)
        free(held[t]);

    /* the slowest rank's total, and each phase's slowest rank */
    double io = phase[CREATE] + phase[WRITE] + phase[CLOSE], io_max, phase_max[NPHASES];
    uint64_t checksum_all;
    MPI_Reduce(&io, &io_max, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
    MPI_Reduce(phase, phase_max, NPHASES, MPI_DOUBLE, MPI_MAX, 0, comm);
    MPI_Reduce(&checksum, &checksum_all, 1, MPI_UINT64_T, MPI_SUM, 0, comm);
    if (l->rank == 0) {
        uint64_t bytes = nob_data_bytes(l->model, o->days);
        printf("netcdf-output-bench: mode=%s library=%s model=%s ranks=%d days=%d batch=%d"
               " bytes=%" PRIu64 " seconds=%.6f MiB/s=%.2f files=%d checksum=%016" PRIx64
               " sync=%s access=%s create_seconds=%.6f write_seconds=%.6f close_seconds=%.6f\n",
               mode_names[o->mode], o->backend->name, l->model->name, l->nranks, o->days, batch,
               bytes, io_max, io_max > 0 ? bytes / 1048576.0 / io_max : 0.0,
               file_count(o->mode), checksum_all, sync_names[o->io.sync],
               o->io.independent ? "independent" : "collective", phase_max[CREATE],
               phase_max[WRITE], phase_max[CLOSE]);
        fflush(stdout);
    }
}

/* Read every record of every field back, rank by rank over its own rows. */
static int run_verify(const options *o, const nob_layout *l, MPI_Comm comm)
{
    int file_per_field = o->mode == MODE_SERIAL || o->mode == MODE_SEPARATE;
    uint64_t checksum = 0, mismatches = 0, records = 0;
    int reported = 0;
    void *files = o->backend->open_read(o->backend->lib, l, o->output_dir, file_per_field,
                                        comm);

    for (int t = 0; t < NOB_NTYPES; t++) {
        const nob_output_type *ty = &nob_types[t];
        size_t n = nob_block_values(l, ty, 1);
        float *buf = malloc(sizeof(float) * (n + 1));
        for (int f = 0; f < ty->nfields; f++)
            for (int rec = 0; rec < nob_total_records(l, ty); rec++) {
                o->backend->read(files, t, f, rec, 1, buf);
                checksum += nob_checksum_block(l, ty, f, rec, 1, buf);
                long first = -1;
                size_t bad = nob_count_mismatches(l, ty, f, rec, 1, buf, &first);
                mismatches += bad;
                records++;
                if (bad && !reported) {
                    /* first bad value of this rank, in global coordinates */
                    long per_lev = (long)l->nrows * l->model->nlon;
                    fprintf(stderr,
                            "verify: rank %d: %zu bad values in %s field_%02d record %d;"
                            " first at lev=%ld lat=%ld lon=%ld\n",
                            l->rank, bad, ty->name, f + 1, rec, first / per_lev,
                            l->lat0 + (first % per_lev) / l->model->nlon,
                            first % l->model->nlon);
                    reported = 1;
                }
            }
        free(buf);
    }
    o->backend->close(files);

    uint64_t sums[2] = {checksum, mismatches}, totals[2];
    MPI_Allreduce(sums, totals, 2, MPI_UINT64_T, MPI_SUM, comm);
    if (l->rank == 0) {
        printf("verify: %s fields=%d records=%" PRIu64 " mismatches=%" PRIu64
               " checksum=%016" PRIx64 "\n",
               totals[1] == 0 ? "OK" : "FAILED", nob_total_fields(), records, totals[1],
               totals[0]);
        fflush(stdout);
    }
    return totals[1] == 0 ? 0 : EXIT_VERIFY_FAILED;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    nob_layout layout = {0};
    MPI_Comm_size(comm, &layout.nranks);
    MPI_Comm_rank(comm, &layout.rank);

    options o;
    int parsed = parse_options(argc, argv, &o, layout.rank);
    if (parsed != 0) {
        MPI_Finalize();
        return parsed == -2 ? 0 : EXIT_USAGE;
    }
    if (o.plan_only) {
        if (layout.rank == 0)
            print_plan(&o);
        MPI_Finalize();
        return 0;
    }
    layout.model = o.model;
    layout.ndays = o.days;
    nob_block_rows(o.model->nlat, layout.nranks, layout.rank, &layout.lat0, &layout.nrows);

    if (!o.verify_only) {
        if (layout.rank == 0)
            make_dirs(o.output_dir);
        MPI_Barrier(comm);
        run_write(&o, &layout, comm);
    }
    int rc = 0;
    if (o.verify || o.verify_only)
        rc = run_verify(&o, &layout, comm);
    MPI_Finalize();
    return rc;
}
