/* Runs every core unit test group; cmocka prints the counts of each. */
#include "tests.h"

int main(void)
{
    int failed = 0;
    failed += run_url_tests();
    failed += run_buf_tests();
    failed += run_router_tests();
    failed += run_arena_tests();
    failed += run_config_tests();
    failed += run_netaddr_tests();
    failed += run_metrics_tests();
    failed += run_json_tests();
    failed += run_hash_tests();
    return failed ? 1 : 0;
}
