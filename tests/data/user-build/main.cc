// Which FDB and ecCodes this program runs with: the versions the libraries report, and the
// files the process mapped (/proc/self/maps), after FDB has done some work (a listing).
#include <eccodes.h>

#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "eckit/runtime/Main.h"
#include "fdb5/api/FDB.h"
#include "fdb5/api/helpers/FDBToolRequest.h"
#include "fdb5/fdb5_version.h"
#include "metkit/mars/MarsRequest.h"

int main(int argc, char** argv) {
    eckit::Main::initialise(argc, argv);
    std::cout << "fdb5 version " << fdb5_version_str() << "\n";
    std::cout << "eccodes version " << codes_get_api_version() << "\n";
    fdb5::FDB fdb;
    size_t listed = 0;
    auto it = fdb.list(fdb5::FDBToolRequest(metkit::mars::MarsRequest("list"), true));  // every field
    fdb5::ListElement element;
    while (it.next(element)) ++listed;
    std::cout << "fields listed " << listed << "\n";
    std::set<std::string> seen;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        auto slash = line.find('/');
        if (slash == std::string::npos) continue;
        std::string path = line.substr(slash);
        for (const char* lib : {"/libfdb5.so", "/libeckit.so", "/libmetkit.so", "/libeccodes.so"})
            if (path.find(lib) != std::string::npos && seen.insert(path).second)
                std::cout << "mapped " << path << "\n";
    }
    return 0;
}
