// fdb-archive-bench: archive GRIB fields into FDB the way a model's I/O server does, with
// the key it already has (fdb5::FDB::archive(key, data, length)), or the way fdb-hammer
// does, from the message alone (FDB decodes each one with ecCodes to find its key).
//
// --path raw is the same loop without FDB: a plain write() of each field into one file
// (--raw-file), and with --raw-sync flush an fdatasync() of it at every flush: the disk's
// own speed for the same bytes, for FDB/raw ratios measured in one program.
//
// Fields are fdb-hammer's: the template with number, step and param set, looped over
// members, then steps, then params, with a flush after every (member, step). With
// --writers N, writer W (0-based) takes every N-th (member, step) pair from the W-th, so
// N concurrent writers archive the same fields as one, each under its own keys.
//
// Timed (and reported in fdb-hammer's `Name: value` form): archive and flush calls only;
// encoding each field (ecCodes) is not. "Archive CPU seconds" is the process's CPU
// (every thread: eckit's asynchronous writers too) less the encoding thread's own; the
// page faults and context switches are counted the same way (getrusage), the write calls
// and the bytes they were given from /proc/self/io (syscw, wchar), for the whole loop.
//
// --verify reads every field back (fdb5::FDB::retrieve, request made from its key),
// compares it byte for byte with the field encoded again, and checks that decoding the
// field gives the key the key path used; exit status 2 if anything differs.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <getopt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <eccodes.h>

#include "eckit/io/Buffer.h"
#include "eckit/io/DataHandle.h"
#include "eckit/io/MemoryHandle.h"
#include "eckit/message/Message.h"
#include "eckit/message/Reader.h"
#include "eckit/runtime/Main.h"

#include "fdb5/api/FDB.h"
#include "fdb5/database/Key.h"
#include "fdb5/message/MessageDecoder.h"
#include "metkit/mars/MarsRequest.h"

namespace {

enum { EXIT_USAGE = 1, EXIT_VERIFY_FAILED = 2, EXIT_ERROR = 3 };

struct Options {
    std::string path = "key";
    std::string templ;
    std::string expver = "0001";
    std::string cls = "od";
    std::string raw_file;
    bool raw_sync = false;
    long nsteps = 0, nparams = 0, members = 1, number = 1, writer = 0, writers = 1;
    bool verify = false;
};

void usage(FILE* out) {
    std::fprintf(out,
                 "usage: fdb-archive-bench --template GRIB --nsteps N --nparams P [options]\n"
                 "  --path key|message|raw   archive with the key (default), the message alone, or\n"
                 "                       no FDB: write() the fields into --raw-file\n"
                 "  --raw-file F         the raw path's file (created; appended to)\n"
                 "  --raw-sync flush|none    the raw path's fdatasync at every flush (default none)\n"
                 "  --members M          ensemble members (default 1), numbered from --number\n"
                 "  --number K           first ensemble member (default 1)\n"
                 "  --nparams P          parameters 1..P per step (at most 10)\n"
                 "  --writer W --writers N   this writer's share: every N-th (member, step) from the W-th\n"
                 "  --expver E --class C     set on every field (default 0001, od)\n"
                 "  --verify             read the fields back and compare instead of writing\n");
}

bool parse_long(const char* s, long lo, long hi, long* out) {
    char* end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

int parse(int argc, char** argv, Options& o) {
    static const option longopts[] = {
        {"path", required_argument, nullptr, 'p'},    {"template", required_argument, nullptr, 't'},
        {"nsteps", required_argument, nullptr, 's'},  {"nparams", required_argument, nullptr, 'P'},
        {"members", required_argument, nullptr, 'm'}, {"number", required_argument, nullptr, 'n'},
        {"writer", required_argument, nullptr, 'w'},  {"writers", required_argument, nullptr, 'W'},
        {"expver", required_argument, nullptr, 'e'},  {"class", required_argument, nullptr, 'c'},
        {"verify", no_argument, nullptr, 'v'},        {"help", no_argument, nullptr, 'h'},
        {"raw-file", required_argument, nullptr, 'r'}, {"raw-sync", required_argument, nullptr, 'S'},
        {nullptr, 0, nullptr, 0},
    };
    int c;
    bool ok = true;
    while ((c = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
        switch (c) {
        case 'p': o.path = optarg; break;
        case 't': o.templ = optarg; break;
        case 's': ok = ok && parse_long(optarg, 1, 100000, &o.nsteps); break;
        case 'P': ok = ok && parse_long(optarg, 1, 10, &o.nparams); break;
        case 'm': ok = ok && parse_long(optarg, 1, 10000, &o.members); break;
        case 'n': ok = ok && parse_long(optarg, 0, 100000, &o.number); break;
        case 'w': ok = ok && parse_long(optarg, 0, 100000, &o.writer); break;
        case 'W': ok = ok && parse_long(optarg, 1, 100000, &o.writers); break;
        case 'e': o.expver = optarg; break;
        case 'c': o.cls = optarg; break;
        case 'v': o.verify = true; break;
        case 'r': o.raw_file = optarg; break;
        case 'S':
            ok = ok && (std::strcmp(optarg, "flush") == 0 || std::strcmp(optarg, "none") == 0);
            o.raw_sync = std::strcmp(optarg, "flush") == 0;
            break;
        case 'h': usage(stdout); return -2;
        default: ok = false;
        }
    }
    const char* problem = nullptr;
    if (!ok || optind != argc)
        problem = "invalid arguments";
    else if (o.templ.empty() || o.nsteps == 0 || o.nparams == 0)
        problem = "--template, --nsteps and --nparams are required";
    else if (o.path != "key" && o.path != "message" && o.path != "raw")
        problem = "--path is key, message or raw";
    else if ((o.path == "raw") != !o.raw_file.empty())
        problem = "--raw-file goes with --path raw, and only with it";
    else if (o.path == "raw" && o.verify)
        problem = "--verify reads FDB: not with --path raw";
    else if (o.writer >= o.writers)
        problem = "--writer must be below --writers";
    if (problem) {
        std::fprintf(stderr, "fdb-archive-bench: %s (--help for usage)\n", problem);
        return -1;
    }
    return 0;
}

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "fdb-archive-bench: %s\n", what.c_str());
    std::exit(EXIT_ERROR);
}

void codes_check(int err, const char* call) {
    if (err)
        fail(std::string(call) + ": " + codes_get_error_message(err));
}

// What the process (every thread) has used so far: CPU, page faults, context switches
// (getrusage), write calls and the bytes given to them (/proc/self/io).
struct Usage {
    double cpu = 0;
    long faults = 0, switches = 0, write_calls = 0, write_bytes = 0;

    static Usage of(int who) {
        rusage u{};
        getrusage(who, &u);
        Usage r;
        r.cpu = u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
        r.faults = u.ru_minflt + u.ru_majflt;
        r.switches = u.ru_nvcsw + u.ru_nivcsw;
        if (who == RUSAGE_SELF) {
            std::ifstream io("/proc/self/io");
            std::string name;
            long value;
            while (io >> name >> value) {
                if (name == "syscw:")
                    r.write_calls = value;
                else if (name == "wchar:")
                    r.write_bytes = value;
            }
        }
        return r;
    }
    Usage operator-(const Usage& b) const {
        return {cpu - b.cpu, faults - b.faults, switches - b.switches, write_calls - b.write_calls,
                write_bytes - b.write_bytes};
    }
    Usage& operator+=(const Usage& b) {
        cpu += b.cpu, faults += b.faults, switches += b.switches;
        return *this;
    }
};

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The template, re-encoded per field with ecCodes (the caller's work, never timed).
class Fields {
public:
    Fields(const Options& o) {
        FILE* f = std::fopen(o.templ.c_str(), "rb");
        if (!f)
            fail(o.templ + ": cannot open");
        int err = 0;
        h_ = codes_handle_new_from_file(nullptr, f, PRODUCT_GRIB, &err);
        std::fclose(f);
        if (!h_)
            fail(o.templ + ": no GRIB message");
        set_string("expver", o.expver);
        set_string("class", o.cls);
    }
    ~Fields() { codes_handle_delete(h_); }

    // The field's message (valid until the next call).
    std::pair<const void*, size_t> encode(long number, long step, long param) {
        codes_check(codes_set_long(h_, "number", number), "set number");
        codes_check(codes_set_long(h_, "step", step), "set step");
        codes_check(codes_set_long(h_, "param", param), "set param");
        const void* data = nullptr;
        size_t size = 0;
        codes_check(codes_get_message(h_, &data, &size), "get message");
        return {data, size};
    }

private:
    void set_string(const char* key, const std::string& value) {
        size_t len = value.size();
        codes_check(codes_set_string(h_, key, value.c_str(), &len), key);
    }
    codes_handle* h_ = nullptr;
};

// The raw path: the fields' bytes appended to one file with write(), an fdatasync() at
// every flush if asked; what FDB's writer does at its data files, without FDB.
class RawFile {
public:
    RawFile(const std::string& path, bool sync) : path_(path), sync_(sync) {
        fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
        if (fd_ < 0)
            fail(path + ": cannot open: " + std::strerror(errno));
    }
    ~RawFile() { ::close(fd_); }

    void write(const void* data, size_t size) {
        const char* p = static_cast<const char*>(data);
        while (size > 0) {
            ssize_t n = ::write(fd_, p, size);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                fail(path_ + ": write: " + std::strerror(errno));
            p += n, size -= n;
        }
    }
    void flush() {
        if (sync_ && ::fdatasync(fd_) != 0)
            fail(path_ + ": fdatasync: " + std::strerror(errno));
    }

private:
    std::string path_;
    bool sync_;
    int fd_ = -1;
};

// Where the fields go: FDB, with the key or from the message alone, or the raw file. The
// timed calls are these two functions, never inlined, so that a profiler can count them
// alone: valgrind --tool=callgrind --toggle-collect='*timed_archive*'
// --toggle-collect='*timed_flush*' (README.md).
struct Sink {
    std::unique_ptr<fdb5::FDB> fdb;
    std::unique_ptr<RawFile> raw;
};

[[gnu::noinline]] void timed_archive(Sink& sink, const fdb5::Key* key, const void* data, size_t size) {
    if (sink.raw)
        sink.raw->write(data, size);
    else if (key)
        sink.fdb->archive(*key, data, size);
    else
        sink.fdb->archive(data, size);
    asm volatile("");  // no tail call: the function stays on the stack for the profiler
}

[[gnu::noinline]] void timed_flush(Sink& sink) {
    if (sink.raw)
        sink.raw->flush();
    else
        sink.fdb->flush();
    asm volatile("");
}

// What FDB itself would make of a message: the key the message path archives under.
fdb5::Key decoded_key(const void* data, size_t size) {
    eckit::MemoryHandle handle(data, size);
    eckit::message::Reader reader(handle);
    eckit::message::Message msg = reader.next();
    if (!msg)
        fail("a field did not decode as a message");
    return fdb5::MessageDecoder::messageToKey(msg);
}

// The key path's key of one field: the template's decoded key with the loop's values,
// as a model's I/O server keeps it.
fdb5::Key field_key(fdb5::Key key, long number, long step, long param) {
    key.set("number", std::to_string(number));
    key.set("step", std::to_string(step));
    key.set("param", std::to_string(param));
    return key;
}

// This writer's fields: (member, step) pairs numbered member * nsteps + step, every
// writers-th from the writer's own; all params of a pair, then end_of_step (the flush).
template <typename F>
void for_each_field(const Options& o, F&& field, const std::function<void()>& end_of_step) {
    for (long pair = o.writer; pair < o.members * o.nsteps; pair += o.writers) {
        const long member = pair / o.nsteps, step = pair % o.nsteps;
        for (long param = 1; param <= o.nparams; ++param)
            field(o.number + member, step, param);
        end_of_step();
    }
}

int write(const Options& o) {
    Fields fields(o);
    Sink sink;
    if (o.path == "raw")
        sink.raw.reset(new RawFile(o.raw_file, o.raw_sync));
    else
        sink.fdb.reset(new fdb5::FDB());
    auto first = fields.encode(o.number, 0, 1);
    const fdb5::Key base = decoded_key(first.first, first.second);

    size_t count = 0, bytes = 0, flushes = 0;
    double timed = 0;
    Usage encoding;
    const Usage start = Usage::of(RUSAGE_SELF);
    for_each_field(
        o,
        [&](long number, long step, long param) {
            const Usage e0 = Usage::of(RUSAGE_THREAD);
            auto msg = fields.encode(number, step, param);
            encoding += Usage::of(RUSAGE_THREAD) - e0;
            const double t0 = now();
            if (o.path == "key") {
                const fdb5::Key key = field_key(base, number, step, param);
                timed_archive(sink, &key, msg.first, msg.second);
            }
            else {
                timed_archive(sink, nullptr, msg.first, msg.second);
            }
            timed += now() - t0;
            ++count;
            bytes += msg.second;
        },
        [&] {
            const double t0 = now();
            timed_flush(sink);
            timed += now() - t0;
            ++flushes;
        });
    const Usage used = Usage::of(RUSAGE_SELF) - start;
    std::printf("Path: %s\nWriter: %ld of %ld\nFields written: %zu\nBytes written: %zu\n"
                "Flushes: %zu\nWriting duration: %.6f\nArchive CPU seconds: %.6f\n"
                "Archive page faults: %ld\nArchive context switches: %ld\n"
                "Write calls: %ld\nBytes to write calls: %ld\n",
                o.path.c_str(), o.writer, o.writers, count, bytes, flushes, timed, used.cpu - encoding.cpu,
                used.faults - encoding.faults, used.switches - encoding.switches, used.write_calls,
                used.write_bytes);
    return 0;
}

int verify(const Options& o) {
    Fields fields(o);
    fdb5::FDB fdb;
    auto first = fields.encode(o.number, 0, 1);
    const fdb5::Key base = decoded_key(first.first, first.second);
    size_t count = 0, mismatches = 0, key_mismatches = 0;
    std::vector<char> got;
    for_each_field(
        o,
        [&](long number, long step, long param) {
            auto msg = fields.encode(number, step, param);
            const fdb5::Key key = field_key(base, number, step, param);
            if (!(decoded_key(msg.first, msg.second) == key))
                ++key_mismatches;
            std::map<std::string, std::string> values(key.begin(), key.end());
            std::unique_ptr<eckit::DataHandle> dh(fdb.retrieve(metkit::mars::MarsRequest("retrieve", values)));
            got.assign(msg.second + 1, 0);
            size_t total = 0;
            dh->openForRead();
            for (long n; total < got.size() && (n = dh->read(got.data() + total, got.size() - total)) > 0;)
                total += n;
            dh->close();
            ++count;
            if (total != msg.second || std::memcmp(got.data(), msg.first, total) != 0) {
                if (mismatches++ == 0)
                    std::fprintf(stderr, "fdb-archive-bench: number=%ld step=%ld param=%ld: read %zu bytes, "
                                 "archived %zu, or they differ\n", number, step, param, total, msg.second);
            }
        },
        [] {});
    std::printf("Fields verified: %zu\nVerify mismatches: %zu\nKey mismatches: %zu\n", count, mismatches,
                key_mismatches);
    return mismatches || key_mismatches ? EXIT_VERIFY_FAILED : 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    int parsed = parse(argc, argv, o);
    if (parsed)
        return parsed == -2 ? 0 : EXIT_USAGE;
    // FDB_HOME is the home of eckit's resource files ($FDB_HOME/etc/config/local: fdbBufferSize,
    // ...), as it is for FDB's own tools
    eckit::Main::initialise(argc, argv, "FDB_HOME");
    try {
        return o.verify ? verify(o) : write(o);
    }
    catch (const std::exception& e) {
        fail(e.what());
    }
}
