/* fuzz_daemon_request.c: ergond's HTTP request parser and dispatcher, its config and lease-state
 * parsers on arbitrary bytes. */
#include "daemon/daemon_internal.h"
#include "ergon/gpu.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static erg_gpu *gpu;
    static erg_daemon *d;
    if (!gpu) {
        if (erg_gpu_open("sim:a100:gpt3-xl:2", &gpu, NULL) ||
            erg__daemon_new_detached("allow 0 uid:1000\n", gpu, &d, NULL))
            return 0;
    }
    erg__http_req req;
    int r = erg__http_parse((const char *)data, size, &req);
    if (r == 1) {
        erg__buf resp = {0};
        /* As a non-root allowed user and as an unknown one. */
        erg__peer allowed = {.uid = 1000, .gid = 1000, .pid = getpid()};
        erg__peer other = {.uid = 1001, .gid = 1001, .pid = getpid(), .ngroups = 1, .groups = {7}};
        erg__daemon_handle(d, &req, &allowed, &resp);
        erg__daemon_handle(d, &req, &other, &resp);
        erg__buf_free(&resp);
    }
    erg__query q;
    char tmp[1100];
    size_t n = size < sizeof tmp - 1 ? size : sizeof tmp - 1;
    memcpy(tmp, data, n);
    tmp[n] = '\0';
    erg__query_parse(tmp, &q);
    uint64_t mask;
    erg__parse_gpu_ids(tmp, 8, &mask);
    erg__config cfg;
    if (erg__config_parse((const char *)data, size, "fuzz.conf", &cfg, NULL) == ERG_OK)
        erg__config_free(&cfg);
    erg__state st;
    if (erg__state_parse((const char *)data, size, "fuzz.leases", &st, NULL) == ERG_OK) {
        for (size_t i = 0; i < st.n; i++)
            if (st.rec[i].gpu < 0 || st.rec[i].gpu > 63 || st.rec[i].bits < 1 ||
                st.rec[i].bits > 7 || (!st.rec[i].pending && st.rec[i].pid <= 0))
                __builtin_trap(); /* the parser promised these bounds */
        erg__state_free(&st);
    }
    return 0;
}
