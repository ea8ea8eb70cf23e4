/* Health probe of the configured storage: the local directory is writable, or the S3 bucket
 * answers a presigned HEAD (bucket-level, empty key). cb(ok) fires once, from the loop. */
#pragma once
#include <stdbool.h>

void storage_probe(void (*cb)(bool ok, void *data), void *data);
