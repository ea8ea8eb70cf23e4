/* Health probe of the configured storage: the local driver writes and removes a probe file
 * under STORAGE_DIR; the s3 driver HEADs the bucket with a header-signed request. cb(ok) fires
 * once, from the loop. */
#pragma once
#include <stdbool.h>

void storage_probe(void (*cb)(bool ok, void *data), void *data);
