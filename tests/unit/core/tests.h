/* Test groups of the core unit runner. */
#pragma once
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

int run_url_tests(void);
int run_buf_tests(void);
int run_router_tests(void);
int run_arena_tests(void);
int run_config_tests(void);
int run_netaddr_tests(void);
int run_metrics_tests(void);
int run_json_tests(void);
int run_hash_tests(void);
