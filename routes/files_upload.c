/* POST /api/files/upload (multipart/form-data). */
#include "core/router.h"
#include "routes/files.h"

void files_upload_register(void) {}
