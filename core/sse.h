/* Server-sent events framing (text/event-stream), shared by every stream writer. */
#pragma once
#include <stddef.h>

#include "core/sbuf.h"

/* Encodes one event: "id: ID\nevent: EVENT\ndata: ...\n\n". The payload becomes one data line
 * per line (a newline in it starts a new "data: " line, CR bytes are dropped), so no payload can
 * end the event early or inject a field. CR and LF in id and event are dropped for the same
 * reason. Returns a new shared buffer (refs 1). */
sbuf_t *sse_encode_event(const char *id, size_t idlen, const char *event, size_t evlen,
                         const char *data, size_t dlen);
