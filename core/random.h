/* Kernel randomness (getrandom; never blocks once the system has booted). */
#pragma once
#include <stddef.h>

void random_bytes(void *out, size_t n);
