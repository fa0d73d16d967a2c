/* Linked into every executable the craype stand-ins build. If such a
 * program is started while IOSTACK_RUN_MARKER is set (the tests set it for
 * the configure step only), it records itself there: a configure that
 * executed a test program leaves a non-empty marker file. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor))
static void iostack_run_marker(int argc, char** argv, char** envp)
{
    const char* path = getenv("IOSTACK_RUN_MARKER");
    FILE* f;
    (void)envp;
    if (path == NULL || *path == '\0')
        return;
    f = fopen(path, "a");
    if (f == NULL)
        return;
    fprintf(f, "%s\n", argc > 0 && argv[0] ? argv[0] : "?");
    fclose(f);
}
