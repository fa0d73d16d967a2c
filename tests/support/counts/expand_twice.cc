/* A real CPU-side regression in FDB's archive path, for the work-count gate's injection
 * tests (issue 38: "FDB expanding its schema rule twice"): LD_PRELOAD'ed into
 * fdb-archive-bench, with IOSTACK_INJECT_EXPAND_TWICE set, every field's key is expanded
 * against the schema a second time: fdb5::Schema::expand(key, visitor), which
 * fdb5::Archiver::archive calls through libfdb5's PLT (so this definition wins), runs FDB's
 * own once more after the real one, with a visitor that selects every database, index and
 * datum the rules lead to and does nothing there. The second expansion matches the same
 * rules, builds the same keys and recurses into the database's schema as the first, but
 * archives nothing: what is archived, and every byte FDB writes, is the first's. Without the
 * variable it only forwards. C++, so a shim of its own beside archive_slowdown.c: the
 * visitor is an fdb5::WriteVisitor, from Debian's libfdb5-dev headers. Build it with
 * -fno-rtti: LD_PRELOAD puts it in every program of the run (sh, strace, valgrind's), where
 * no libfdb5 defines WriteVisitor's type information. */
#include <dlfcn.h>
#include <cstdlib>
#include <vector>

#include "fdb5/database/Key.h"
#include "fdb5/database/WriteVisitor.h"
#include "fdb5/rules/Schema.h"

namespace {

// the keys last selected at each level, made before the visitor that is given them (FDB's
// WriteVisitor uses them as it is constructed: a member of ExpandOnly's, made after it, was a
// SIGBUS)
struct Previous {
    std::vector<fdb5::Key> keys = std::vector<fdb5::Key>(3);
};

class ExpandOnly : private Previous, public fdb5::WriteVisitor {
public:
    ExpandOnly(const fdb5::Schema& schema) : fdb5::WriteVisitor(keys), schema_(schema) {}
    bool selectDatabase(const fdb5::Key&, const fdb5::Key&) override { return true; }
    bool selectIndex(const fdb5::Key&, const fdb5::Key&) override { return true; }
    bool selectDatum(const fdb5::Key&, const fdb5::Key&) override { return true; }
    // the database's schema is the master's copy (the workload's one schema file)
    const fdb5::Schema& databaseSchema() const override { return schema_; }

protected:
    void print(std::ostream& out) const override { out << "ExpandOnly"; }

private:
    const fdb5::Schema& schema_;
};

using expand_fn = void (*)(const fdb5::Schema*, const fdb5::Key&, fdb5::WriteVisitor&);

}  // namespace

void fdb5::Schema::expand(const fdb5::Key& field, fdb5::WriteVisitor& visitor) const {
    static expand_fn real;
    static int twice = -1;
    if (!real)
        real = reinterpret_cast<expand_fn>(
            dlsym(RTLD_NEXT, "_ZNK4fdb56Schema6expandERKNS_3KeyERNS_12WriteVisitorE"));
    if (twice < 0)
        twice = std::getenv("IOSTACK_INJECT_EXPAND_TWICE") != nullptr;
    real(this, field, visitor);
    if (twice) {
        ExpandOnly again(*this);
        real(this, field, again);
    }
}
