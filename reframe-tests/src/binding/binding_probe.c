/* Where a rank of a Slurm job step and its OpenMP threads run, seen from inside the job:
 * the CPUs /proc says each may run on and the binding hwloc reads, and the node's topology
 * (packages, NUMA domains, cores and their hardware threads) as hwloc sees it. Judged by
 * reframe-tests/iostack_rfm/parsers/binding.py against the site's NPS/SMT layout.
 *
 *     srun ... binding_probe [--omp-places=cores] [--omp-proc-bind=close]
 *
 * The rank's own binding is read before OpenMP starts: libgomp binds the initial thread to
 * its first place as the program loads when OMP_PROC_BIND is set, so the job must not set it.
 * The probe reads the rank's CPUs, then runs itself again with OMP_PLACES and OMP_PROC_BIND
 * from its options, in which the threads report theirs. One line per rank on stdout:
 *
 *     binding: {"host": ..., "rank": R, "local": L, "proc": [cpus], "hwloc": [cpus],
 *               "threads": [{"thread": T, "proc": [...], "hwloc": [...]}, ...],
 *               "topology": {...}}      (topology: from the node's local rank 0 only)
 */
#define _GNU_SOURCE
#include <hwloc.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIST 65536

/* Cpus_allowed_list of /proc/thread-self/status (the calling thread's), "" if none */
static void proc_cpus(char *out, size_t size) {
    char line[LIST];
    FILE *f = fopen("/proc/thread-self/status", "r");
    out[0] = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = 0;
            snprintf(out, size, "%s", v);
            break;
        }
    }
    fclose(f);
}

/* "0-2,5" -> "[0,1,2,5]" */
static void list_to_json(const char *list, char *out, size_t size) {
    size_t n = 0;
    const char *p = list;
    n += snprintf(out + n, size - n, "[");
    int first = 1;
    while (*p && n < size) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p) break;
        if (*end == '-') b = strtol(end + 1, &end, 10);
        for (long i = a; i <= b && n < size; i++) {
            n += snprintf(out + n, size - n, "%s%ld", first ? "" : ",", i);
            first = 0;
        }
        p = *end == ',' ? end + 1 : end;
    }
    if (n < size) snprintf(out + n, size - n, "]");
}

static void set_to_json(hwloc_const_bitmap_t set, char *out, size_t size) {
    size_t n = snprintf(out, size, "[");
    int first = 1;
    unsigned id;
    hwloc_bitmap_foreach_begin(id, set) {
        if (n >= size) break;
        n += snprintf(out + n, size - n, "%s%u", first ? "" : ",", id);
        first = 0;
    } hwloc_bitmap_foreach_end();
    if (n < size) snprintf(out + n, size - n, "]");
}

static void objects_json(hwloc_topology_t topo, hwloc_obj_type_t type, char *out, size_t size) {
    size_t n = snprintf(out, size, "[");
    int count = hwloc_get_nbobjs_by_type(topo, type);
    char one[LIST];
    for (int i = 0; i < count && n < size; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, i);
        set_to_json(obj->cpuset, one, sizeof one);
        n += snprintf(out + n, size - n, "%s%s", i ? "," : "", one);
    }
    if (n < size) snprintf(out + n, size - n, "]");
}

static const char *env_or(const char *name, const char *fallback) {
    const char *v = getenv(name);
    return v ? v : fallback;
}

int main(int argc, char **argv) {
    static char proc[LIST], json[LIST], hw[LIST];
    const char *places = "cores", *bind = "close";
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--omp-places=", 13) == 0) places = argv[i] + 13;
        else if (strncmp(argv[i], "--omp-proc-bind=", 16) == 0) bind = argv[i] + 16;
    }
    hwloc_topology_t topo;
    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();

    if (!getenv("BINDING_PROBE_PROC")) {
        /* first run: the rank as Slurm started it */
        if (getenv("OMP_PROC_BIND") || getenv("OMP_PLACES")) {
            fprintf(stderr, "binding_probe: OMP_PROC_BIND/OMP_PLACES are set: OpenMP has "
                    "bound this rank before it could be read; pass --omp-proc-bind and "
                    "--omp-places instead\n");
            return 2;
        }
        proc_cpus(proc, sizeof proc);
        list_to_json(proc, json, sizeof json);
        hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS);
        set_to_json(set, hw, sizeof hw);
        setenv("BINDING_PROBE_PROC", json, 1);
        setenv("BINDING_PROBE_HWLOC", hw, 1);
        setenv("OMP_PLACES", places, 1);
        setenv("OMP_PROC_BIND", bind, 1);
        execv("/proc/self/exe", argv);
        perror("binding_probe: execv /proc/self/exe");
        return 2;
    }

    /* second run: the threads, bound by OpenMP within the rank's CPUs */
    int threads = omp_get_max_threads();
    char (*tproc)[LIST] = calloc(threads, LIST), (*thw)[LIST] = calloc(threads, LIST);
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        char mine[LIST];
        hwloc_bitmap_t own = hwloc_bitmap_alloc();
        proc_cpus(mine, sizeof mine);
        list_to_json(mine, tproc[t], LIST);
        hwloc_get_cpubind(topo, own, HWLOC_CPUBIND_THREAD);
        set_to_json(own, thw[t], LIST);
        hwloc_bitmap_free(own);
    }
    char host[256] = "";
    gethostname(host, sizeof host);
    host[strcspn(host, ".")] = 0;
    const char *local = env_or("SLURM_LOCALID", "0");
    printf("binding: {\"host\": \"%s\", \"rank\": %s, \"local\": %s, \"proc\": %s, "
           "\"hwloc\": %s, \"threads\": [", env_or("SLURMD_NODENAME", host),
           env_or("SLURM_PROCID", "0"), local, getenv("BINDING_PROBE_PROC"),
           getenv("BINDING_PROBE_HWLOC"));
    for (int t = 0; t < threads; t++)
        printf("%s{\"thread\": %d, \"proc\": %s, \"hwloc\": %s}", t ? ", " : "", t, tproc[t],
               thw[t]);
    printf("]");
    if (strcmp(local, "0") == 0) {
        static char packages[LIST], numa[LIST], cores[4 * LIST];
        objects_json(topo, HWLOC_OBJ_PACKAGE, packages, sizeof packages);
        objects_json(topo, HWLOC_OBJ_NUMANODE, numa, sizeof numa);
        objects_json(topo, HWLOC_OBJ_CORE, cores, sizeof cores);
        printf(", \"topology\": {\"packages\": %s, \"numa\": %s, \"cores\": %s}", packages,
               numa, cores);
    }
    printf("}\n");
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    return 0;
}
